__version__ = "0.3.0"
SCHEMA_VERSION = "1"
