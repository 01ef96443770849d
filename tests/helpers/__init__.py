"""What the tests share: configs, reference implementations, models and runs built for the
tests, readers of the files W&B writes, and the fault-injection wrapper."""
