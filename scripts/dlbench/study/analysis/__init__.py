"""Statistics of the comparisons and the racing of comparison groups, in plain Python and NumPy; the tables' names
and keys; the report's first answer (fastest, over the summary and comparisons tables, with pandas)."""
