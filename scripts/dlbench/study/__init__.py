"""The study's side of the package: what plans a study (configuration, plan, catalog, dependencies, runlock, slurm),
prepares its datasets (image_folder), aggregates its records (analysis/) and reports them (report/, palette, cpus),
with the config's and the record's reference pages (config_docs, record_docs). It runs in the driver's environment
(Snakemake) and the tools' (pandas, matplotlib), and may import anything of dlbench.

Everything of dlbench outside this package also runs inside a framework's environment, in the training, max-batch and
operator jobs: it imports the standard library and NumPy only (each adapter its framework), and never this package
(tests/unit/test_dependencies.py holds both).
"""
