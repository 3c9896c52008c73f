// The HTTP client moved to CurlHTTP, which the object store shares; every module that imports
// Matching still sees it, so the move changed no importer.
@_exported import CurlHTTP
