"""The engine: ``stop`` is asked after every step, the first included."""

import torch

from ssldyn.dynamics.engine import run


def test_stop_after_the_first_step_ends_the_run_there():
    calls = []

    def stop(s, t):
        calls.append(t)
        return True

    res = run(0, lambda s, t: (s + 1, torch.tensor(float(t))), steps=5, every=10, final=False, stop=stop)
    assert res.state == 1 and calls == [0]  # one update, then stopped
    assert res.trajectory.series("loss")[0].tolist() == [0]  # the stopping step is logged
    # the same from a resumed start: the first step of the resumed run is step 2
    calls.clear()
    res = run(0, lambda s, t: (s + 1, torch.tensor(float(t))), steps=5, every=10, final=False, stop=stop, start=2)
    assert res.state == 1 and calls == [2]


# from the mutation audit of the engine
def test_stop_is_not_asked_at_the_final_evaluation():
    """The final evaluation (t = steps) is no step: stop is asked after steps 0 .. steps − 1 only, so a stop that
    would say True there adds no row outside the schedule (every=[0] logs step 0 only)."""
    calls = []

    def stop(s, t):
        calls.append(t)
        return t >= 4

    res = run(0, lambda s, t: (s + 1, torch.tensor(float(t))), steps=4, every=[0], stop=stop)
    assert calls == [0, 1, 2, 3] and res.state == 4
    assert res.trajectory.series("loss")[0].tolist() == [0]
