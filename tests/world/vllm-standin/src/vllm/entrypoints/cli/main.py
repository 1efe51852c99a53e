"""`vllm` console script (stand-in): only the `serve` sub-command exists in this image."""
import sys
import traceback


def main(argv=None):
    from vllm._standin import cli, server
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser, args, table = cli.parse(argv)
        if args.subparser != "serve":
            parser.print_help()
            return 1 if args.subparser is None else 2
        server.serve(args, table)
    except SystemExit:
        raise
    except Exception:
        # Like the real CLI: the exception escapes with its traceback, exit status 1.
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
