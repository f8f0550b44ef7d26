__version__ = "0.5.7"
SCHEMA_VERSION = "1"
