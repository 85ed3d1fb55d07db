"""Train a collision network: `python train.py +experiment=<name>`.

Training (LOCC and Global-OCN as Hydra-configured Lightning modules) is not implemented yet.
This entry point says so and exits with status 2 instead of pretending to train.
"""

import sys


def main() -> int:
    print(
        "contactnet: training is not implemented yet (LOCC / Global-OCN arrive with the "
        "models-and-training issue). Nothing was trained.",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
