"""Entity linking: name normalisation, the gazetteer (known names in a text) and matching the
entities a question names. Shared by ingest (extraction), recall and the graph services."""
