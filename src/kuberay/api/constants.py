"""Every name the operator shares with the outside world: labels, annotations, finalizers,
environment variables, ports, condition types/reasons and event reasons, and the REST locations
of the ray.io kinds.

Other tools (Ray's autoscaler, Kueue, Volcano, ``kubectl ray``, dashboards) match these strings
literally, so they must equal KubeRay v1.7's byte for byte; keeping them in one module makes a
typo a single-point fix and lets tests compare them against the reference.
"""

from __future__ import annotations

from typing import Final

from kuberay.runtime.resource import Resource

GROUP: Final = "ray.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND_RAYCLUSTER: Final = "RayCluster"
KIND_RAYJOB: Final = "RayJob"
KIND_RAYSERVICE: Final = "RayService"
KIND_RAYCRONJOB: Final = "RayCronJob"

# Where the four kinds live in the REST API (the one definition every layer imports).
RAYCLUSTERS: Final = Resource(GROUP, VERSION, "rayclusters", kind=KIND_RAYCLUSTER)
# cert-manager's kinds the mTLS controller writes (gate RayClusterMTLS).
CM_ISSUERS: Final = Resource("cert-manager.io", "v1", "issuers", kind="Issuer")
CM_CERTIFICATES: Final = Resource("cert-manager.io", "v1", "certificates", kind="Certificate")
RAYJOBS: Final = Resource(GROUP, VERSION, "rayjobs", kind=KIND_RAYJOB)
RAYSERVICES: Final = Resource(GROUP, VERSION, "rayservices", kind=KIND_RAYSERVICE)
RAYCRONJOBS: Final = Resource(GROUP, VERSION, "raycronjobs", kind=KIND_RAYCRONJOB)

KUBERAY_VERSION: Final = "v1.7.0"
MANAGED_BY_KUBERAY: Final = "ray.io/kuberay-operator"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"

# ----------------------------------------------------------------------------- labels
LABEL_IS_RAY_NODE: Final = "ray.io/is-ray-node"
LABEL_CLUSTER: Final = "ray.io/cluster"
LABEL_NODE_TYPE: Final = "ray.io/node-type"
LABEL_GROUP: Final = "ray.io/group"
LABEL_IDENTIFIER: Final = "ray.io/identifier"
LABEL_APP_NAME: Final = "app.kubernetes.io/name"
LABEL_CREATED_BY: Final = "app.kubernetes.io/created-by"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_SERVE: Final = "ray.io/serve"
LABEL_WORKER_GROUP_REPLICA_INDEX: Final = "ray.io/worker-group-replica-index"
LABEL_WORKER_GROUP_REPLICA_NAME: Final = "ray.io/worker-group-replica-name"
LABEL_REPLICA_HOST_INDEX: Final = "ray.io/replica-host-index"
LABEL_ORIGINATED_FROM_CR_NAME: Final = "ray.io/originated-from-cr-name"
LABEL_ORIGINATED_FROM_CRD: Final = "ray.io/originated-from-crd"
LABEL_JOB_SUBMISSION_MODE: Final = "ray.io/job-submission-mode"
LABEL_HEADLESS_WORKER_SVC: Final = "ray.io/headless-worker-svc"
LABEL_CRONJOB_NAME: Final = "ray.io/cronjob-name"
LABEL_PRIORITY_CLASS_NAME: Final = "ray.io/priority-class-name"
LABEL_GANG_SCHEDULING_ENABLED: Final = "ray.io/gang-scheduling-enabled"
LABEL_ENDPOINTSLICE_SERVICE_NAME: Final = "kubernetes.io/service-name"

APP_NAME: Final = "kuberay"
CREATED_BY: Final = "kuberay-operator"
NODE_TYPE_HEAD: Final = "head"
NODE_TYPE_WORKER: Final = "worker"
NODE_TYPE_REDIS_CLEANUP: Final = "redis-cleanup"
HEAD_GROUP_NAME: Final = "headgroup"
SUBMITTER_GROUP_NAME: Final = "submittergroup"

# ----------------------------------------------------------------------------- annotations
ANNOTATION_FT_ENABLED: Final = "ray.io/ft-enabled"
ANNOTATION_EXTERNAL_STORAGE_NAMESPACE: Final = "ray.io/external-storage-namespace"
ANNOTATION_GCS_FT_DELETION_TIMEOUT: Final = "ray.io/gcs-ft-deletion-timeout"
ANNOTATION_OVERWRITE_CONTAINER_CMD: Final = "ray.io/overwrite-container-cmd"
ANNOTATION_ENABLE_SERVE_SERVICE: Final = "ray.io/enable-serve-service"
ANNOTATION_DISABLE_PROVISIONED_HEAD_RESTART: Final = "ray.io/disable-provisioned-head-restart"
ANNOTATION_INITIALIZING_TIMEOUT: Final = "ray.io/initializing-timeout"
ANNOTATION_HASH_WITHOUT_REPLICAS: Final = "ray.io/hash-without-replicas-and-workers-to-delete"
ANNOTATION_NUM_WORKER_GROUPS: Final = "ray.io/num-worker-groups"
ANNOTATION_KUBERAY_VERSION: Final = "ray.io/kuberay-version"
ANNOTATION_UPGRADE_STRATEGY_RECREATE_HASH: Final = "ray.io/upgrade-strategy-recreate-hash"
ANNOTATION_CRONJOB_SCHEDULED_TIMESTAMP: Final = "ray.io/cronjob-scheduled-timestamp"
ANNOTATION_INGRESS_CLASS: Final = "kubernetes.io/ingress.class"
ANNOTATION_VOLCANO_GROUP_NAME: Final = "scheduling.k8s.io/group-name"
ANNOTATION_VOLCANO_TASK_SPEC: Final = "volcano.sh/task-spec"
ANNOTATION_YUNIKORN_TASK_GROUPS: Final = "yunikorn.apache.org/task-groups"
ANNOTATION_YUNIKORN_TASK_GROUP_NAME: Final = "yunikorn.apache.org/task-group-name"
# Beyond upstream: what upstream's RayService controller keeps only in memory, recorded on the
# RayCluster it is about so that it survives an operator restart.
ANNOTATION_SERVE_CONFIG_HASH: Final = "ray.io/serve-config-hash"
ANNOTATION_DELETION_AT: Final = "ray.io/deletion-scheduled-at"

# ----------------------------------------------------------------------------- finalizers
FINALIZER_GCS_FT_REDIS_CLEANUP: Final = "ray.io/gcs-ft-redis-cleanup-finalizer"
FINALIZER_RAYJOB: Final = "ray.io/rayjob-finalizer"
FINALIZER_RAYSERVICE: Final = "ray.io/rayservice-finalizer"

# ----------------------------------------------------------------------------- ports
CLIENT_PORT: Final = 10001
CLIENT_PORT_NAME: Final = "client"
GCS_SERVER_PORT: Final = 6379
GCS_SERVER_PORT_NAME: Final = "gcs-server"
DASHBOARD_PORT: Final = 8265
DASHBOARD_PORT_NAME: Final = "dashboard"
METRICS_PORT: Final = 8080
METRICS_PORT_NAME: Final = "metrics"
SERVE_PORT: Final = 8000
SERVE_PORT_NAME: Final = "serve"
DASHBOARD_AGENT_LISTEN_PORT: Final = 52365
GATEWAY_LISTENER_PORT: Final = 80
GATEWAY_LISTENER_NAME: Final = "http"
HISTORY_EVENTS_PORT: Final = 8084
WEBHOOK_PORT: Final = 9443

DEFAULT_PORTS: Final = {
    CLIENT_PORT_NAME: CLIENT_PORT,
    GCS_SERVER_PORT_NAME: GCS_SERVER_PORT,
    DASHBOARD_PORT_NAME: DASHBOARD_PORT,
    METRICS_PORT_NAME: METRICS_PORT,
    SERVE_PORT_NAME: SERVE_PORT,
}

# ----------------------------------------------------------------------------- names
RAY_CONTAINER_INDEX: Final = 0
AUTOSCALER_CONTAINER_NAME: Final = "autoscaler"
SUBMITTER_CONTAINER_NAME: Final = "ray-job-submitter"
HISTORY_COLLECTOR_CONTAINER_NAME: Final = "ray-history-collector"
WAIT_GCS_READY_INIT_CONTAINER: Final = "wait-gcs-ready"
WAIT_FOR_TLS_IP_SAN_INIT_CONTAINER: Final = "wait-for-tls-ip-san"
SHARED_MEMORY_VOLUME: Final = "shared-mem"
RAY_LOGS_VOLUME: Final = "ray-logs"
RAY_LOGS_PATH: Final = "/tmp/ray"
RAY_TOKEN_VOLUME: Final = "ray-token"
RAY_TOKEN_PATH: Final = "/var/run/secrets/ray.io/serviceaccount"
RAY_TLS_VOLUME: Final = "ray-tls"
RAY_TLS_PATH: Final = "/etc/ray/tls"
GCS_STORAGE_VOLUME: Final = "gcs-storage"
GCS_STORAGE_PATH: Final = "/data/gcs"
AUTH_TOKEN_SECRET_KEY: Final = "auth_token"
LEADER_ELECTION_ID: Final = "ray-operator-leader"

# Name length limits (validation).
MAX_RAYCLUSTER_NAME_LENGTH: Final = 53
MAX_RAYJOB_NAME_LENGTH: Final = 47
MAX_RAYSERVICE_NAME_LENGTH: Final = 47
MAX_RAYCRONJOB_NAME_LENGTH: Final = 36

# ----------------------------------------------------------------------------- env vars
# Injected into Ray containers.
ENV_FQ_RAY_IP: Final = "FQ_RAY_IP"
ENV_RAY_IP: Final = "RAY_IP"
ENV_RAY_CLUSTER_NAME: Final = "RAY_CLUSTER_NAME"
ENV_RAY_CLUSTER_NAMESPACE: Final = "RAY_CLUSTER_NAMESPACE"
ENV_RAY_CLOUD_INSTANCE_ID: Final = "RAY_CLOUD_INSTANCE_ID"
ENV_RAY_NODE_TYPE_NAME: Final = "RAY_NODE_TYPE_NAME"
ENV_KUBERAY_GEN_RAY_START_CMD: Final = "KUBERAY_GEN_RAY_START_CMD"
ENV_RAY_PORT: Final = "RAY_PORT"
ENV_RAY_ADDRESS: Final = "RAY_ADDRESS"
ENV_RAY_USAGE_STATS_KUBERAY_IN_USE: Final = "RAY_USAGE_STATS_KUBERAY_IN_USE"
ENV_RAY_USAGE_STATS_EXTRA_TAGS: Final = "RAY_USAGE_STATS_EXTRA_TAGS"
ENV_RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE: Final = "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE"
ENV_RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO: Final = "RAY_timeout_ms_task_wait_for_death_info"
ENV_RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS: Final = "RAY_gcs_server_request_timeout_seconds"
ENV_RAY_SERVE_KV_TIMEOUT_S: Final = "RAY_SERVE_KV_TIMEOUT_S"
ENV_RAY_ENABLE_AUTOSCALER_V2: Final = "RAY_enable_autoscaler_v2"
ENV_RAY_REDIS_ADDRESS: Final = "RAY_REDIS_ADDRESS"
ENV_REDIS_USERNAME: Final = "REDIS_USERNAME"
ENV_REDIS_PASSWORD: Final = "REDIS_PASSWORD"
ENV_RAY_EXTERNAL_STORAGE_NAMESPACE: Final = "RAY_external_storage_namespace"
ENV_RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S: Final = "RAY_gcs_rpc_server_reconnect_timeout_s"
ENV_RAY_GCS_STORAGE: Final = "RAY_gcs_storage"
ENV_RAY_GCS_STORAGE_PATH: Final = "RAY_gcs_storage_path"
ENV_RAY_REDIS_DB_CONNECT_RETRIES: Final = "RAY_redis_db_connect_retries"
ENV_RAY_REDIS_DB_CONNECT_WAIT_MILLISECONDS: Final = "RAY_redis_db_connect_wait_milliseconds"
ENV_RAY_AUTH_MODE: Final = "RAY_AUTH_MODE"
ENV_RAY_AUTH_TOKEN: Final = "RAY_AUTH_TOKEN"
ENV_RAY_ENABLE_K8S_TOKEN_AUTH: Final = "RAY_ENABLE_K8S_TOKEN_AUTH"
ENV_RAY_USE_TLS: Final = "RAY_USE_TLS"
ENV_RAY_TLS_SERVER_CERT: Final = "RAY_TLS_SERVER_CERT"
ENV_RAY_TLS_SERVER_KEY: Final = "RAY_TLS_SERVER_KEY"
ENV_RAY_TLS_CA_CERT: Final = "RAY_TLS_CA_CERT"
TLS_ENV_VARS: Final = (
    ENV_RAY_USE_TLS,
    ENV_RAY_TLS_SERVER_CERT,
    ENV_RAY_TLS_SERVER_KEY,
    ENV_RAY_TLS_CA_CERT,
)
ENV_RAY_ENABLE_RAY_EVENT: Final = "RAY_enable_ray_event"
ENV_RAY_ENABLE_CORE_WORKER_EVENT_TO_AGGREGATOR: Final = (
    "RAY_enable_core_worker_ray_event_to_aggregator"
)
ENV_RAY_AGGREGATOR_EVENTS_EXPORT_ADDR: Final = "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR"
ENV_RAY_AGGREGATOR_EXPOSABLE_EVENT_TYPES: Final = (
    "RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES"
)
ENV_RAY_AGGREGATOR_PUBLISHER_EXPOSABLE_EVENT_TYPES: Final = (
    "RAY_DASHBOARD_AGGREGATOR_AGENT_PUBLISHER_HTTP_ENDPOINT_EXPOSABLE_EVENT_TYPES"
)
# Autoscaler sidecar.
ENV_RAY_HEAD_POD_NAME: Final = "RAY_HEAD_POD_NAME"
ENV_KUBERAY_CRD_VER: Final = "KUBERAY_CRD_VER"
ENV_KUBERAY_GEN_AUTOSCALER_START_CMD: Final = "KUBERAY_GEN_AUTOSCALER_START_CMD"
# Submitter.
ENV_PYTHONUNBUFFERED: Final = "PYTHONUNBUFFERED"
ENV_RAY_DASHBOARD_ADDRESS: Final = "RAY_DASHBOARD_ADDRESS"
ENV_RAY_JOB_SUBMISSION_ID: Final = "RAY_JOB_SUBMISSION_ID"
# History collector.
ENV_POD_IP: Final = "POD_IP"
ENV_RAY_ROLE: Final = "RAY_ROLE"
ENV_EVENTS_PORT: Final = "EVENTS_PORT"
ENV_OWNER_KIND: Final = "OWNER_KIND"
ENV_OWNER_NAME: Final = "OWNER_NAME"
ENV_STORAGE_BACKEND: Final = "STORAGE_BACKEND"
HISTORY_COLLECTOR_MANAGED_ENV: Final = (
    "POD_IP",
    "FQ_RAY_IP",
    "RAY_CLUSTER_NAME",
    "RAY_CLUSTER_NAMESPACE",
    "RAY_ROLE",
    "OWNER_KIND",
    "OWNER_NAME",
    "EVENTS_PORT",
)

# Operator process environment (name, default).
ENV_ENABLE_INIT_CONTAINER_INJECTION: Final = "ENABLE_INIT_CONTAINER_INJECTION"
ENV_ENABLE_PROBES_INJECTION: Final = "ENABLE_PROBES_INJECTION"
ENV_ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE: Final = "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE"
ENV_CLUSTER_DOMAIN: Final = "CLUSTER_DOMAIN"
ENV_USE_INGRESS_ON_OPENSHIFT: Final = "USE_INGRESS_ON_OPENSHIFT"
ENV_RAYCLUSTER_DEFAULT_REQUEUE_SECONDS: Final = "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV"
ENV_ENABLE_GCS_FT_REDIS_CLEANUP: Final = "ENABLE_GCS_FT_REDIS_CLEANUP"
ENV_ENABLE_ZERO_DOWNTIME: Final = "ENABLE_ZERO_DOWNTIME"
ENV_DELETE_RAYJOB_CR_AFTER_JOB_FINISHES: Final = "DELETE_RAYJOB_CR_AFTER_JOB_FINISHES"
ENV_ENABLE_DETERMINISTIC_HEAD_POD_NAME: Final = "ENABLE_DETERMINISTIC_HEAD_POD_NAME"
ENV_ENABLE_LOGIN_SHELL: Final = "ENABLE_LOGIN_SHELL"
ENV_ENABLE_RANDOM_POD_DELETE: Final = "ENABLE_RANDOM_POD_DELETE"
ENV_RAYJOB_TRANSITION_GRACE_PERIOD: Final = (
    "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS"
)
ENV_RAYJOB_STATUS_CHECK_TIMEOUT: Final = "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS"
ENV_ENABLE_WEBHOOKS: Final = "ENABLE_WEBHOOKS"
OPERATOR_ENV_DEFAULTS: Final = {
    ENV_ENABLE_INIT_CONTAINER_INJECTION: "true",
    ENV_ENABLE_PROBES_INJECTION: "true",
    ENV_ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE: "false",
    ENV_CLUSTER_DOMAIN: "cluster.local",
    ENV_USE_INGRESS_ON_OPENSHIFT: "false",
    ENV_RAYCLUSTER_DEFAULT_REQUEUE_SECONDS: "300",
    ENV_ENABLE_GCS_FT_REDIS_CLEANUP: "true",
    ENV_ENABLE_ZERO_DOWNTIME: "true",
    ENV_DELETE_RAYJOB_CR_AFTER_JOB_FINISHES: "false",
    ENV_ENABLE_DETERMINISTIC_HEAD_POD_NAME: "false",
    ENV_ENABLE_LOGIN_SHELL: "false",
    ENV_ENABLE_RANDOM_POD_DELETE: "false",
    ENV_RAYJOB_TRANSITION_GRACE_PERIOD: "300",
    ENV_RAYJOB_STATUS_CHECK_TIMEOUT: "300",
    ENV_ENABLE_WEBHOOKS: "false",
}

# ----------------------------------------------------------------------------- enum values
UPGRADE_RECREATE: Final = "Recreate"
UPGRADE_NONE: Final = "None"
RAYSERVICE_UPGRADE_NEW_CLUSTER: Final = "NewCluster"
RAYSERVICE_UPGRADE_INCREMENTAL: Final = "NewClusterWithIncrementalUpgrade"
AUTH_MODE_DISABLED: Final = "disabled"
AUTH_MODE_TOKEN: Final = "token"
GCS_BACKEND_REDIS: Final = "redis"
GCS_BACKEND_ROCKSDB: Final = "rocksdb"
AUTOSCALER_V1: Final = "v1"
AUTOSCALER_V2: Final = "v2"
NETWORK_POLICY_DENY_ALL: Final = "DenyAll"
NETWORK_POLICY_DENY_ALL_INGRESS: Final = "DenyAllIngress"
NETWORK_POLICY_DENY_ALL_EGRESS: Final = "DenyAllEgress"
K8S_JOB_MODE: Final = "K8sJobMode"
HTTP_MODE: Final = "HTTPMode"
INTERACTIVE_MODE: Final = "InteractiveMode"
SIDECAR_MODE: Final = "SidecarMode"
DELETE_CLUSTER: Final = "DeleteCluster"
DELETE_WORKERS: Final = "DeleteWorkers"
DELETE_SELF: Final = "DeleteSelf"
DELETE_NONE: Final = "DeleteNone"

# RayCluster status.state
CLUSTER_STATE_READY: Final = "ready"
CLUSTER_STATE_FAILED: Final = "failed"
CLUSTER_STATE_SUSPENDED: Final = "suspended"

# RayJob jobStatus (Ray's) and jobDeploymentStatus (ours).
JOB_STATUS_NEW: Final = ""
JOB_STATUS_PENDING: Final = "PENDING"
JOB_STATUS_RUNNING: Final = "RUNNING"
JOB_STATUS_STOPPED: Final = "STOPPED"
JOB_STATUS_SUCCEEDED: Final = "SUCCEEDED"
JOB_STATUS_FAILED: Final = "FAILED"
JOB_STATUS_TERMINAL: Final = frozenset(
    {JOB_STATUS_STOPPED, JOB_STATUS_SUCCEEDED, JOB_STATUS_FAILED}
)
DEPLOYMENT_NEW: Final = ""
DEPLOYMENT_INITIALIZING: Final = "Initializing"
DEPLOYMENT_RUNNING: Final = "Running"
DEPLOYMENT_COMPLETE: Final = "Complete"
DEPLOYMENT_FAILED: Final = "Failed"
DEPLOYMENT_VALIDATION_FAILED: Final = "ValidationFailed"
DEPLOYMENT_SUSPENDING: Final = "Suspending"
DEPLOYMENT_SUSPENDED: Final = "Suspended"
DEPLOYMENT_RETRYING: Final = "Retrying"
DEPLOYMENT_WAITING: Final = "Waiting"
DEPLOYMENT_TERMINAL: Final = frozenset({DEPLOYMENT_COMPLETE, DEPLOYMENT_FAILED})
# RayJob status.reason
JOB_REASON_SUBMISSION_FAILED: Final = "SubmissionFailed"
JOB_REASON_DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
JOB_REASON_PRE_RUNNING_DEADLINE_EXCEEDED: Final = "PreRunningDeadlineExceeded"
JOB_REASON_APP_FAILED: Final = "AppFailed"
JOB_REASON_TRANSITION_GRACE_PERIOD_EXCEEDED: Final = (
    "JobDeploymentStatusTransitionGracePeriodExceeded"
)
JOB_REASON_STATUS_CHECK_TIMEOUT_EXCEEDED: Final = "JobStatusCheckTimeoutExceeded"
JOB_REASON_VALIDATION_FAILED: Final = "ValidationFailed"

# Serve application / deployment statuses.
APP_NOT_STARTED: Final = "NOT_STARTED"
APP_DEPLOYING: Final = "DEPLOYING"
APP_RUNNING: Final = "RUNNING"
APP_DEPLOY_FAILED: Final = "DEPLOY_FAILED"
APP_DELETING: Final = "DELETING"
APP_UNHEALTHY: Final = "UNHEALTHY"
DEPLOYMENT_UPDATING: Final = "UPDATING"
DEPLOYMENT_HEALTHY: Final = "HEALTHY"
DEPLOYMENT_UNHEALTHY: Final = "UNHEALTHY"
DEFAULT_SERVE_APP_NAME: Final = "default"
RAYSERVICE_STATUS_RUNNING: Final = "Running"

# ----------------------------------------------------------------------------- conditions
# RayCluster
COND_HEAD_POD_READY: Final = "HeadPodReady"
COND_RAYCLUSTER_PROVISIONED: Final = "RayClusterProvisioned"
COND_REPLICA_FAILURE: Final = "ReplicaFailure"
COND_RAYCLUSTER_SUSPENDING: Final = "RayClusterSuspending"
COND_RAYCLUSTER_SUSPENDED: Final = "RayClusterSuspended"
REASON_HEAD_POD_RUNNING_AND_READY: Final = "HeadPodRunningAndReady"
REASON_HEAD_POD_NOT_FOUND: Final = "HeadPodNotFound"
REASON_UNKNOWN: Final = "Unknown"
REASON_CONTAINERS_NOT_READY: Final = "ContainersNotReady"
REASON_ALL_POD_RUNNING_AND_READY_FIRST_TIME: Final = "AllPodRunningAndReadyFirstTime"
REASON_RAYCLUSTER_PODS_PROVISIONING: Final = "RayClusterPodsProvisioning"
REASON_FAILED_DELETE_ALL_PODS: Final = "FailedDeleteAllPods"
REASON_FAILED_DELETE_HEAD_POD: Final = "FailedDeleteHeadPod"
REASON_FAILED_CREATE_HEAD_POD: Final = "FailedCreateHeadPod"
REASON_FAILED_DELETE_WORKER_POD: Final = "FailedDeleteWorkerPod"
REASON_FAILED_CREATE_WORKER_POD: Final = "FailedCreateWorkerPod"
# RayService
COND_READY: Final = "Ready"
COND_UPGRADE_IN_PROGRESS: Final = "UpgradeInProgress"
COND_ROLLBACK_IN_PROGRESS: Final = "RollbackInProgress"
COND_SUSPENDING: Final = "Suspending"
COND_SUSPENDED: Final = "Suspended"
REASON_INITIALIZING: Final = "Initializing"
REASON_INITIALIZING_TIMEOUT: Final = "InitializingTimeout"
REASON_NON_ZERO_SERVE_ENDPOINTS: Final = "NonZeroServeEndpoints"
REASON_ZERO_SERVE_ENDPOINTS: Final = "ZeroServeEndpoints"
REASON_VALIDATION_FAILED: Final = "ValidationFailed"
REASON_SUSPEND_REQUESTED: Final = "SuspendRequested"
REASON_SUSPEND_IN_PROGRESS: Final = "SuspendInProgress"
REASON_SUSPEND_COMPLETE: Final = "SuspendComplete"
REASON_RAYSERVICE_RESUMED: Final = "RayServiceResumed"
REASON_BOTH_ACTIVE_PENDING_CLUSTERS_EXIST: Final = "BothActivePendingClustersExist"
REASON_NO_PENDING_CLUSTER: Final = "NoPendingCluster"
REASON_NO_ACTIVE_CLUSTER: Final = "NoActiveCluster"
REASON_DESIRED_CLUSTER_SPEC_CHANGED: Final = "DesiredClusterSpecChanged"

# ----------------------------------------------------------------------------- events
EVENT_ACTIONS: Final = ("Create", "Delete", "Update", "Validate", "Reconcile", "Cleanup", "Suspend")
# Legacy reasons declared on the RayCluster type.
EVENT_RAY_CONFIG_ERROR: Final = "RayConfigError"
EVENT_POD_RECONCILIATION_ERROR: Final = "PodReconciliationError"
# RayCluster
EVENT_INVALID_RAYCLUSTER_STATUS: Final = "InvalidRayClusterStatus"
EVENT_INVALID_RAYCLUSTER_SPEC: Final = "InvalidRayClusterSpec"
EVENT_INVALID_RAYCLUSTER_METADATA: Final = "InvalidRayClusterMetadata"
EVENT_CREATED_HEAD_POD: Final = "CreatedHeadPod"
EVENT_FAILED_TO_CREATE_HEAD_POD: Final = "FailedToCreateHeadPod"
EVENT_DELETED_HEAD_POD: Final = "DeletedHeadPod"
EVENT_FAILED_TO_DELETE_HEAD_POD: Final = "FailedToDeleteHeadPod"
EVENT_CREATED_WORKER_POD: Final = "CreatedWorkerPod"
EVENT_FAILED_TO_CREATE_WORKER_POD: Final = "FailedToCreateWorkerPod"
EVENT_DELETED_WORKER_POD: Final = "DeletedWorkerPod"
EVENT_FAILED_TO_DELETE_WORKER_POD: Final = "FailedToDeleteWorkerPod"
EVENT_FAILED_TO_DELETE_WORKER_POD_COLLECTION: Final = "FailedToDeleteWorkerPodCollection"
EVENT_CREATED_REDIS_CLEANUP_JOB: Final = "CreatedRedisCleanupJob"
EVENT_FAILED_TO_CREATE_REDIS_CLEANUP_JOB: Final = "FailedToCreateRedisCleanupJob"
EVENT_FORCE_DELETED_STUCK_CLUSTER: Final = "ForceDeletedStuckCluster"
# RayJob
EVENT_INVALID_RAYJOB_SPEC: Final = "InvalidRayJobSpec"
EVENT_INVALID_RAYJOB_METADATA: Final = "InvalidRayJobMetadata"
EVENT_INVALID_RAYJOB_STATUS: Final = "InvalidRayJobStatus"
EVENT_CREATED_RAYJOB_SUBMITTER: Final = "CreatedRayJobSubmitter"
EVENT_DELETED_RAYJOB_SUBMITTER: Final = "DeletedRayJobSubmitter"
EVENT_FAILED_TO_CREATE_RAYJOB_SUBMITTER: Final = "FailedToCreateRayJobSubmitter"
EVENT_FAILED_TO_DELETE_RAYJOB_SUBMITTER: Final = "FailedToDeleteRayJobSubmitter"
EVENT_CREATED_RAYCLUSTER: Final = "CreatedRayCluster"
EVENT_UPDATED_RAYCLUSTER: Final = "UpdatedRayCluster"
EVENT_DELETED_RAYCLUSTER: Final = "DeletedRayCluster"
EVENT_FAILED_TO_CREATE_RAYCLUSTER: Final = "FailedToCreateRayCluster"
EVENT_FAILED_TO_DELETE_RAYCLUSTER: Final = "FailedToDeleteRayCluster"
EVENT_FAILED_TO_UPDATE_RAYCLUSTER: Final = "FailedToUpdateRayCluster"
EVENT_RAYCLUSTER_NOT_FOUND: Final = "RayClusterNotFound"
# Batch schedulers
EVENT_BATCH_SCHEDULER_CLEANED_UP: Final = "BatchSchedulerCleanedUp"
EVENT_FAILED_TO_CLEANUP_BATCH_SCHEDULER: Final = "FailedToCleanupBatchScheduler"
# RayCronJob
EVENT_INVALID_RAYCRONJOB_SPEC: Final = "InvalidRayCronJobSpec"
EVENT_SUSPENDED_RAYCRONJOB: Final = "SuspendedRayCronJob"
# RayService
EVENT_CREATED_GATEWAY: Final = "CreatedGateway"
EVENT_CREATED_HTTPROUTE: Final = "CreatedHTTPRoute"
EVENT_INVALID_RAYSERVICE_SPEC: Final = "InvalidRayServiceSpec"
EVENT_INVALID_RAYSERVICE_METADATA: Final = "InvalidRayServiceMetadata"
EVENT_RAYSERVICE_INITIALIZING_TIMEOUT: Final = "RayServiceInitializingTimeout"
EVENT_ROLLBACK_IMPOSSIBLE: Final = "RollbackImpossible"
EVENT_UPDATED_HEAD_POD_SERVE_LABEL: Final = "UpdatedHeadPodServeLabel"
EVENT_UPDATED_GATEWAY: Final = "UpdatedGateway"
EVENT_UPDATED_HTTPROUTE: Final = "UpdatedHTTPRoute"
EVENT_UPDATED_SERVE_APPLICATIONS: Final = "UpdatedServeApplications"
EVENT_UPDATED_SERVE_TARGET_CAPACITY: Final = "UpdatedServeTargetCapacity"
EVENT_FAILED_TO_UPDATE_HEAD_POD_SERVE_LABEL: Final = "FailedToUpdateHeadPodServeLabel"
EVENT_FAILED_TO_UPDATE_SERVE_APPLICATIONS: Final = "FailedToUpdateServeApplications"
EVENT_FAILED_TO_UPDATE_TARGET_CAPACITY: Final = "FailedToUpdateTargetCapacity"
EVENT_FAILED_TO_CREATE_GATEWAY: Final = "FailedToCreateGateway"
EVENT_FAILED_TO_UPDATE_GATEWAY: Final = "FailedToUpdateGateway"
EVENT_FAILED_TO_DELETE_GATEWAY: Final = "FailedToDeleteGateway"
EVENT_FAILED_TO_CREATE_HTTPROUTE: Final = "FailedToCreateHTTPRoute"
EVENT_FAILED_TO_UPDATE_HTTPROUTE: Final = "FailedToUpdateHTTPRoute"
EVENT_FAILED_TO_DELETE_HTTPROUTE: Final = "FailedToDeleteHTTPRoute"
EVENT_FAILED_TO_DELETE_SERVICE: Final = "FailedToDeleteService"
EVENT_DELETED_GATEWAY: Final = "DeletedGateway"
EVENT_DELETED_HTTPROUTE: Final = "DeletedHTTPRoute"
EVENT_DELETED_SERVICE: Final = "DeletedService"
# Generic
EVENT_DELETED_POD: Final = "DeletedPod"
EVENT_FAILED_TO_DELETE_POD: Final = "FailedToDeletePod"
EVENT_FAILED_TO_DELETE_POD_COLLECTION: Final = "FailedToDeletePodCollection"
EVENT_CREATED_INGRESS: Final = "CreatedIngress"
EVENT_UPDATED_INGRESS: Final = "UpdatedIngress"
EVENT_FAILED_TO_CREATE_INGRESS: Final = "FailedToCreateIngress"
EVENT_FAILED_TO_UPDATE_INGRESS: Final = "FailedToUpdateIngress"
EVENT_CREATED_ROUTE: Final = "CreatedRoute"
EVENT_FAILED_TO_CREATE_ROUTE: Final = "FailedToCreateRoute"
EVENT_CREATED_SERVICE: Final = "CreatedService"
EVENT_UPDATED_SERVICE: Final = "UpdatedService"
EVENT_FAILED_TO_CREATE_SERVICE: Final = "FailedToCreateService"
EVENT_FAILED_TO_UPDATE_SERVICE: Final = "FailedToUpdateService"
EVENT_CREATED_SERVICE_ACCOUNT: Final = "CreatedServiceAccount"
EVENT_FAILED_TO_CREATE_SERVICE_ACCOUNT: Final = "FailedToCreateServiceAccount"
EVENT_CREATED_PVC: Final = "CreatedPVC"
EVENT_FAILED_TO_CREATE_PVC: Final = "FailedToCreatePVC"
EVENT_AUTOSCALER_SERVICE_ACCOUNT_NOT_FOUND: Final = "AutoscalerServiceAccountNotFound"
EVENT_CREATED_ROLE: Final = "CreatedRole"
EVENT_FAILED_TO_CREATE_ROLE: Final = "FailedToCreateRole"
EVENT_CREATED_ROLE_BINDING: Final = "CreatedRoleBinding"
EVENT_FAILED_TO_CREATE_ROLE_BINDING: Final = "FailedToCreateRoleBinding"
EVENT_CREATED_NETWORK_POLICY: Final = "CreatedNetworkPolicy"
EVENT_UPDATED_NETWORK_POLICY: Final = "UpdatedNetworkPolicy"
EVENT_DELETED_NETWORK_POLICY: Final = "DeletedNetworkPolicy"
EVENT_FAILED_TO_CREATE_NETWORK_POLICY: Final = "FailedToCreateNetworkPolicy"
EVENT_FAILED_TO_UPDATE_NETWORK_POLICY: Final = "FailedToUpdateNetworkPolicy"
EVENT_FAILED_TO_DELETE_NETWORK_POLICY: Final = "FailedToDeleteNetworkPolicy"
EVENT_NETWORK_POLICY_NAME_COLLISION: Final = "NetworkPolicyNameCollision"
# mTLS
EVENT_MTLS_PKI_READY: Final = "MTLSPKIReady"
EVENT_MTLS_CERTS_NOT_READY: Final = "MTLSCertsNotReady"
EVENT_MTLS_FAILED_TO_RECONCILE: Final = "MTLSFailedToReconcile"
EVENT_MTLS_CERTIFICATES_UPDATED: Final = "MTLSCertificatesUpdated"
EVENT_MTLS_CERTIFICATE_EXPIRING_SOON: Final = "MTLSCertificateExpiringSoon"

# Event recorder (reporting controller) names.
RECORDER_RAYCLUSTER: Final = "raycluster-controller"
RECORDER_RAYJOB: Final = "rayjob-controller"
RECORDER_RAYSERVICE: Final = "rayservice-controller"
RECORDER_RAYCRONJOB: Final = "raycronjob-controller"
RECORDER_NETWORKPOLICY: Final = "networkpolicy-controller"
RECORDER_MTLS: Final = "raycluster-mtls-controller"

# Beyond upstream: a worker group's negative ``replicas`` is clamped as upstream does, but said
# (a Warning event always; this RayCluster condition while the RayClusterStatusConditions gate
# is on). Upstream has no condition or event of these names.
COND_WORKER_REPLICAS_ADJUSTED: Final = "WorkerReplicasAdjusted"
REASON_NEGATIVE_REPLICAS: Final = "NegativeReplicas"
EVENT_INVALID_REPLICAS: Final = "InvalidReplicas"
# Beyond upstream (which only sends the InvalidRayClusterSpec/-Metadata event): a RayCluster the
# operator refuses also says so in status, reason equal to that event's reason.
COND_RAYCLUSTER_VALIDATION_FAILED: Final = "ValidationFailed"
