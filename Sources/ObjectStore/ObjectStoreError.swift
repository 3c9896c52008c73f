/// Why an object store request or the sync failed. Descriptions name the bucket, key and the
/// service's error code, never a credential, so they are safe to log.
public enum ObjectStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case missingCredentials
    case unreadableCredentialsFile(path: String)
    case credentialsFileTooOpen(path: String, mode: String)
    case malformedCredentialsFile(path: String)
    case invalidSettings(String)
    /// libcurl could not complete the exchange (connection refused, timeout, ...).
    case transport(operation: String, url: String, reason: String)
    /// The service refused the signature or the access key (403 with InvalidAccessKeyId,
    /// SignatureDoesNotMatch, ...).
    case credentialsRejected(operation: String, bucket: String, code: String)
    case accessDenied(operation: String, bucket: String, key: String)
    case noSuchBucket(bucket: String)
    case unexpectedStatus(operation: String, key: String, status: Int, code: String)
    case malformedListing(bucket: String, detail: String)
    /// The local published directory is not in a state sync can mirror.
    case localFiles(String)
    /// The publication lock could not be taken (its file, or the database that holds it).
    case publicationLockUnavailable(String)
    case injectedFault(String)

    public var description: String {
        switch self {
        case .missingCredentials:
            return "No object store credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a credentials file (objectStore.credentialsFile, mode 0600)."
        case .unreadableCredentialsFile(let path):
            return "Cannot read the object store credentials file \(path); create it with the lines AWS_ACCESS_KEY_ID=... and AWS_SECRET_ACCESS_KEY=..., mode 0600."
        case .credentialsFileTooOpen(let path, let mode):
            return "The object store credentials file \(path) is readable by others (mode \(mode)); run `chmod 600 \(path)` and rotate the key if others may have copied it."
        case .malformedCredentialsFile(let path):
            return "The object store credentials file \(path) lacks AWS_ACCESS_KEY_ID=... or AWS_SECRET_ACCESS_KEY=... lines; add both."
        case .invalidSettings(let detail):
            return "The object store settings are invalid: \(detail)."
        case .transport(let operation, let url, let reason):
            return "Could not \(operation) at \(url) (\(reason)); check the endpoint URL and the network, then run sync again."
        case .credentialsRejected(let operation, let bucket, let code) where code == "ExpiredToken":
            return "The object store refused the credentials for \(operation) in bucket \(bucket) (ExpiredToken): the temporary credentials have expired; fetch new ones (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or the credentials file) and run sync again."
        case .credentialsRejected(let operation, let bucket, let code):
            return "The object store refused the credentials for \(operation) in bucket \(bucket) (\(code)); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the credentials file), AWS_SESSION_TOKEN if the keys are temporary, and the region."
        case .accessDenied(let operation, let bucket, let key):
            return "The object store denied \(operation) of \(key.isEmpty ? "the listing" : key) in bucket \(bucket) (AccessDenied); grant the sync user s3:PutObject, s3:GetObject, s3:DeleteObject and s3:ListBucket on the prefix (deploy/object-store/README.md)."
        case .noSuchBucket(let bucket):
            return "The bucket \(bucket) does not exist at this endpoint; create it (sync does not) or fix objectStore.bucket."
        case .unexpectedStatus(let operation, let key, let status, let code):
            return "The object store answered \(operation) of \(key.isEmpty ? "the bucket" : key) with HTTP \(status)\(code.isEmpty ? "" : " (\(code))"); run sync again, and check the service's status if it persists."
        case .malformedListing(let bucket, let detail):
            return "The object listing of bucket \(bucket) could not be read (\(detail)); is the endpoint really S3-compatible?"
        case .localFiles(let detail):
            return "The published directory cannot be mirrored: \(detail); run `tracer-server publish` first."
        case .publicationLockUnavailable(let detail):
            return "Could not take the publication lock (\(detail)), so nothing was synced; check the data directory and the database with `tracer-server doctor`, then sync again."
        case .injectedFault(let step):
            return "Sync stopped after step \(step) (injected fault)."
        }
    }
}
