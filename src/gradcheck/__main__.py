"""`python -m gradcheck`: the same program as the `gradcheck` command."""

from .cli import main

if __name__ == "__main__":
    main()
