"""Property-based test of the run store (issue 32, "Done when"): hypothesis drives one store through
random interleavings of commits, ``--force`` replacements, damage, set-aside, permission changes and
crashes (at every point a writer can die: during the write, between the two renames of a
replacement), and after every step checks the store's invariants:

* a listed (finished) run verifies: every file of its manifest is there with its checksum, and it
  holds the value last committed for it;
* nothing intact is ever set aside;
* every run is listed, or listed as damaged, or absent with nothing left on disk but the copies
  deliberately kept aside (``.damaged-*``).

Crashes are the disk states a killed writer leaves (a partial directory owned by a dead PID, a
replaced run renamed to ``.old-*`` with the new one never moved in); unreadable files are made by
``open`` raising PermissionError for their inode (tests run as root, where chmod stops nothing).
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ssldyn.contract.result import Result
from ssldyn.lab.store import DONE, RunStore, verify_run

EXP = "variational.zz-stateful"
DIGESTS = ("aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc")
DEAD_PID = 2**22 + 12345  # above the default pid_max: no live process has it


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="ssldyn-stateful-"))
        self.store = RunStore(self.tmp)
        self.value: dict[str, int] = {}  # digest -> value of its last commit (present runs)
        self.damaged: set[str] = set()  # present runs whose files were damaged
        self.unreadable: dict[str, int] = {}  # digest -> inode made unreadable
        self._real_open = builtins.open
        builtins.open = self._open  # type: ignore[assignment]

    def _open(self, file, *a, **kw):
        if self.unreadable and isinstance(file, (str, Path)):
            try:
                ino = os.stat(file).st_ino
            except OSError:
                ino = None
            if ino is not None and ino in self.unreadable.values():
                raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return self._real_open(file, *a, **kw)

    def teardown(self) -> None:
        builtins.open = self._real_open  # type: ignore[assignment]
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _dir(self, d: str) -> Path:
        return self.store.run_dir(EXP, d)

    def _commit(self, d: str, value: int) -> None:
        with self.store.lock(EXP, d):
            partial = self.store.new_partial(EXP, d)
            res = Result(summary={"value": value}, seed=0, tables={"t": pd.DataFrame({"v": [value]})})
            self.store.write_result(partial, {"experiment": EXP, "hash": d, "seeds": [0]}, {}, [res], [])
            self.store.commit(partial, EXP, d)
        self.value[d] = value
        self.damaged.discard(d)
        self.unreadable.pop(d, None)

    # ------------------------------------------------------------------ rules
    @rule(d=st.sampled_from(DIGESTS), value=st.integers(0, 10**6))
    def commit(self, d: str, value: int) -> None:
        """A run (when absent) or a --force replacement (when present)."""
        self._commit(d, value)

    @precondition(lambda self: self.value)
    @rule(data=st.data(), how=st.sampled_from(["truncate", "edit", "delete", "extra"]))
    def damage(self, data, how: str) -> None:
        d = data.draw(st.sampled_from(sorted(self.value)))
        f = self._dir(d) / "summary.json"  # may be gone already (a run damaged twice)
        if how == "truncate":
            f.write_bytes(f.read_bytes()[:7] if f.exists() else b"{")
        elif how == "edit":
            f.write_text(json.dumps({"seeds": [0], "per_seed": {"0": {"value": -1}}, "notes": []}))
        elif how == "delete":
            f.unlink(missing_ok=True)
        else:
            (self._dir(d) / "stray.txt").write_text("x")
        self.damaged.add(d)

    @precondition(lambda self: self.value)
    @rule(data=st.data())
    def make_unreadable(self, data) -> None:
        d = data.draw(st.sampled_from(sorted(self.value)))
        f = self._dir(d) / "claims.json"
        self.unreadable[d] = os.stat(f).st_ino

    @precondition(lambda self: self.unreadable)
    @rule(data=st.data())
    def make_readable_again(self, data) -> None:
        self.unreadable.pop(data.draw(st.sampled_from(sorted(self.unreadable))))

    @rule(d=st.sampled_from(DIGESTS))
    def set_aside_what_looks_damaged(self, d: str) -> None:
        """What run/reproduce do: check the damage, then set aside (which re-checks under the lock)."""
        bad = d in self.damaged or d in self.unreadable
        before = sorted(p.name for p in self._dir(d).parent.glob(".damaged-*")) if self._dir(d).parent.is_dir() else []
        aside = self.store.set_aside(EXP, d) if d in self.value else None
        if d in self.value and not bad:
            assert aside is None, "an intact run was set aside"
            assert verify_run(self._dir(d)) is None
        if aside is not None:
            assert bad and not os.path.lexists(self._dir(d)) and aside.is_dir()
            assert aside.name not in before
            del self.value[d]
            self.damaged.discard(d)
            self.unreadable.pop(d, None)

    @rule(d=st.sampled_from(DIGESTS), files=st.integers(0, 3))
    def crash_while_writing(self, d: str, files: int) -> None:
        """A writer killed while writing its partial directory (its lock is released by the OS)."""
        partial = self.store.out / EXP / f".{d}.partial-{DEAD_PID}-dead{files}"
        partial.mkdir(parents=True, exist_ok=True)
        for i in range(files):
            (partial / f"f{i}.json").write_text("{half")

    @precondition(lambda self: any(d not in self.damaged and d not in self.unreadable for d in self.value))
    @rule(data=st.data(), value=st.integers(0, 10**6))
    def crash_between_the_two_renames(self, data, value: int) -> None:
        """A --force writer killed after moving the finished run aside, before moving the new one in."""
        d = data.draw(
            st.sampled_from(sorted(x for x in self.value if x not in self.damaged and x not in self.unreadable))
        )
        final = self._dir(d)
        os.replace(final, final.with_name(f".{d}.old-dead{value % 997}"))
        partial = final.with_name(f".{d}.partial-{DEAD_PID}-new{value % 991}")
        partial.mkdir(exist_ok=True)
        (partial / DONE).write_text("written last, never moved in")
        # the model is unchanged: the old run must come back, whole

    # ------------------------------------------------------------------ invariants
    @invariant()
    def every_run_is_listed_damaged_or_absent_with_nothing_left(self) -> None:
        listed = {r.path.name: r for r in self.store.finished()}
        damaged = {p.name: reason for p, reason in self.store.damaged()}
        for d in DIGESTS:
            if d in self.value and d not in self.damaged and d not in self.unreadable:
                assert d in listed, (d, damaged.get(d))
                run = listed[d]
                assert verify_run(run.path) is None
                assert run.summary["value"] == self.value[d]  # the value last committed, never an older one
            elif d in self.value:
                assert d in damaged and d not in listed, d
            else:
                assert d not in listed and d not in damaged
                assert not os.path.lexists(self._dir(d))
            leftovers = (
                [p.name for p in (self.store.out / EXP).glob(f".{d}.*")] if (self.store.out / EXP).is_dir() else []
            )
            assert leftovers == [], leftovers  # the reads above repaired what crashed writers left

    @invariant()
    def a_done_run_has_all_its_files(self) -> None:
        for d in DIGESTS:
            path = self._dir(d)
            if (path / DONE).is_file() and d not in self.damaged and d not in self.unreadable:
                assert verify_run(path) is None
                for f in ("config.json", "meta.json", "summary.json", "claims.json", "MANIFEST.json"):
                    assert (path / f).is_file()


StoreMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_store_state_machine = StoreMachine.TestCase
