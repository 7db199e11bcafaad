"""The Typer command-line interface: parsing and printing only; the work happens in the library."""
