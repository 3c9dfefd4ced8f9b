"""``python -m ssldyn …``: the same command line as the ``ssldyn`` console script (:func:`ssldyn.lab.cli.main`)."""

from ssldyn.lab.cli import main

if __name__ == "__main__":
    main()
