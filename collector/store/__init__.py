"""DuckDB storage: schema, migrations and the single group-commit writer."""
