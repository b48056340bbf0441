from gpulab.cli import main

raise SystemExit(main())
