"""DuckDB, as the analysis imports it: its C++ extension alone where the package ships it
as a module of its own (duckdb 2: ``_duckdb``, which ``duckdb`` re-exports whole). The
package's Python layer (its relational API, its version metadata) is most of the cost of
``import duckdb`` and a connection, paid on every ``tracetape diff`` for nothing the
analysis uses (benchmarks/README.md, "Measurements behind the analysis": import). Import
this module only where an analysis runs."""

try:
    import _duckdb as duckdb
except ImportError:  # duckdb before 2.0 keeps its extension inside the package
    import duckdb  # type: ignore[no-redef]

__all__ = ["duckdb"]
