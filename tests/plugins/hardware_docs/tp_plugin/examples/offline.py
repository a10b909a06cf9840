"""Offline inference on Z cards (synthetic example)."""

import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--tp", type=int, default=4)
args = parser.parse_args()
llm_kwargs = {"model": "zaccel/demo-model", "tensor_parallel_size": args.tp}
