"""The tests, in folders that mirror the package's layers (env/, models/, evaluation/, analysis/,
algos/, population/, train/, web/, commands/, files/), the cross-cutting ones (end to end,
reliability, fault injection, packaging, a busy host) in system/, and what they share in
helpers/. A package so that pytest imports each test file by its dotted name from the
repository root (two folders may then hold files of the same name) and so that every test
file imports the shared code as ``tests.helpers.<module>``, with no sys.path edits."""
