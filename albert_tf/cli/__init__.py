"""The command-line layer: absl flags → one settings object → the library, errors as one line.

`app.run_cli` is every CLI's entry: quiet library logs unless `-v 1`, and the
error boundary. `flags` defines the flags several CLIs share, once.
"""
