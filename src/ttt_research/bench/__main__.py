"""``python -m ttt_research.bench``: the speed figures (``bench.main``)."""

from ttt_research.bench import main

raise SystemExit(main())
