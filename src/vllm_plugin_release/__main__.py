from vllm_plugin_release.cli import main

raise SystemExit(main())
