from antlm_bench.cli import main

main()
