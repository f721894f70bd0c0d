export { ClusterStorage, type StorageEventMeta, type StorageClearMeta, type StorageLog } from './cluster-storage.js';
export { StorageAuthority, type AuthorityChannels } from './authority.js';
export { StorageReplica, type ReplicaRuntime, type StorageReplicaOptions } from './replica.js';
export { StorageError, STORAGE_ERROR_CODES, type StorageErrorCode } from './errors.js';
export { MAX_KEY_LENGTH, MAX_VALUE_BYTES, MAX_VALUE_DEPTH, type JsonValue } from './json-value.js';
export { STORAGE_METHODS, type StorageMutation, type StorageSnapshot, type StorageWrite, type WriteAnswer } from './messages.js';
