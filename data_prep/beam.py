"""Apache Beam, imported without the warnings it logs about optional Google Cloud clients.

At import, Beam logs that the GCS and BigQuery clients are missing ("Failed to import
GCSFileSystem", "apitools not found"). They are optional extras that a local job never uses, so
every data_prep command used to open with two lines of noise. The import runs with warnings
disabled; anything Beam logs afterwards (a worker's error, a runner's notice) is logged as usual.
"""

import logging

logging.disable(logging.WARNING)
try:
    import apache_beam
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
    from apache_beam.runners.runner import create_runner
finally:
    logging.disable(logging.NOTSET)

__all__ = ["DirectOptions", "FileSystems", "PipelineOptions", "apache_beam", "create_runner"]
