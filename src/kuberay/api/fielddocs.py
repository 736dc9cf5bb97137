"""Descriptions of the ray.io types and fields, for the generated API reference.

The CRDs carry no descriptions (as upstream's, generated with ``maxDescLen=0``, to stay under
the apiserver's object size limit), so the prose lives here rather than in the schema. Keys are
``"<ModelClass>.<jsonName>"`` for fields and ``"<ModelClass>"`` for types.

Invariant (checked by ``tests/unit/api/test_apidoc.py``): every field of every model reachable
from the four kinds has an entry, and every entry names a field that exists, so the reference
can neither miss a field nor describe one that was removed.
"""

from __future__ import annotations

TYPE_DOCS: dict[str, str] = {
    "RayClusterSpec": "The desired Ray cluster: one head group and any number of worker groups.",
    "RayClusterUpgradeStrategy": "How a change to the pod templates reaches running pods.",
    "AuthOptions": "Token authentication of the Ray dashboard and GCS.",
    "AutoscalerOptions": "The Ray autoscaler sidecar of the head pod (with in-tree autoscaling).",
    "GcsFaultToleranceOptions": "GCS fault tolerance: where the GCS persists its state.",
    "RedisCredential": "A Redis user name or password, literal or from a Secret/ConfigMap.",
    "GcsEmbeddedStorage": "The PersistentVolumeClaim of the embedded (rocksdb) GCS storage.",
    "HistoryServerOptions": "The Ray history server's collector sidecar.",
    "CollectorOptions": "The collector container added to Ray pods for the history server.",
    "NetworkPolicyConfig": "NetworkPolicies the operator creates around the cluster's pods.",
    "NetworkPolicyRules": "Extra rules added to a generated NetworkPolicy.",
    "WorkerGroupNetworkPolicy": "Extra NetworkPolicy rules for one worker group.",
    "TLSOptions": "Mutual TLS between the cluster's Ray processes.",
    "HeadGroupSpec": "The head pod and the Services in front of it.",
    "IngressOptions": "The Ingress of the head's dashboard (with enableIngress).",
    "WorkerGroupSpec": "Identical worker pods, scaled between minReplicas and maxReplicas.",
    "ScaleStrategy": "Explicit scale-down instructions, usually written by the autoscaler.",
    "RayClusterStatus": "What the operator observed of the cluster.",
    "HeadInfo": "Addresses and names of the head pod and head Service.",
    "RayJobSpec": "A Ray job and the cluster it runs on (created for it, or selected).",
    "SubmitterConfig": "Settings of the submitter Job (K8sJobMode).",
    "DeletionStrategy": "What to delete once the job finishes (RayJobDeletionPolicy gate).",
    "DeletionPolicy": "One deletion policy.",
    "DeletionRule": "A deletion applied when a condition holds for long enough.",
    "DeletionCondition": "When a deletion rule fires.",
    "RayJobStatus": "Progress of the job and of its cluster.",
    "RayJobInfo": "Times reported by the Ray job API.",
    "RayServiceSpec": "A Ray Serve application and the cluster serving it.",
    "RayServiceUpgradeStrategy": "How a change of the cluster spec is rolled out.",
    "ClusterUpgradeOptions": "Incremental upgrade through the Gateway API "
    "(NewClusterWithIncrementalUpgrade).",
    "RayServiceStatuses": "Service-level status: the active and the pending cluster.",
    "RayServiceStatus": "Status of one of the service's clusters (active or pending).",
    "AppStatus": "Status of one Serve application.",
    "ServeDeploymentStatus": "Status of one Serve deployment.",
    "RayCronJobSpec": "A schedule that creates RayJobs from a template (RayCronJob gate).",
    "RayCronJobStatus": "What the cron controller last did.",
}

FIELD_DOCS: dict[str, str] = {
    # RayClusterSpec
    "RayClusterSpec.upgradeStrategy": "Whether template changes recreate the cluster's pods.",
    "RayClusterSpec.authOptions": "Authentication of the cluster's Ray endpoints.",
    "RayClusterSpec.suspend": "True deletes every Ray pod and keeps the RayCluster; false "
    "recreates them.",
    "RayClusterSpec.managedBy": "The controller responsible for this object; another value than "
    "`ray.io/kuberay-operator` makes the operator leave it alone (for MultiKueue).",
    "RayClusterSpec.autoscalerOptions": "The autoscaler sidecar's image, resources, mode and "
    "environment.",
    "RayClusterSpec.headServiceAnnotations": "Annotations added to the head Service.",
    "RayClusterSpec.enableInTreeAutoscaling": "Run the Ray autoscaler as a sidecar of the head "
    "pod; it then owns the worker groups' replicas.",
    "RayClusterSpec.gcsFaultToleranceOptions": "Persist the GCS so the cluster survives a head "
    "pod restart.",
    "RayClusterSpec.historyServerOptions": "Collect logs and events for the Ray history server "
    "(RayClusterHistoryServer gate).",
    "RayClusterSpec.networkPolicy": "Isolate the cluster's pods with NetworkPolicies "
    "(RayClusterNetworkPolicy gate).",
    "RayClusterSpec.tlsOptions": "Mutual TLS between Ray processes (RayClusterMTLS gate).",
    "RayClusterSpec.headGroupSpec": "The head pod.",
    "RayClusterSpec.rayVersion": "The Ray version of the images; the injected health probes "
    "depend on it.",
    "RayClusterSpec.workerGroupSpecs": "The worker groups; group names must be unique.",
    "RayClusterUpgradeStrategy.type": "`Recreate` deletes and recreates the pods when a pod "
    "template changes; `None` (or unset) leaves running pods alone.",
    "AuthOptions.enableK8sTokenAuth": "Authenticate with Kubernetes service-account "
    "tokens; no token Secret is generated.",
    "AuthOptions.secretName": "A Secret holding the token to use instead of a generated one.",
    "AuthOptions.mode": "`token` requires a bearer token on the dashboard and GCS; `disabled` "
    "turns authentication off.",
    # AutoscalerOptions
    "AutoscalerOptions.resources": "Resources of the autoscaler container.",
    "AutoscalerOptions.image": "Image of the autoscaler container; default: the head's Ray image.",
    "AutoscalerOptions.imagePullPolicy": "Pull policy of the autoscaler container.",
    "AutoscalerOptions.securityContext": "Security context of the autoscaler container.",
    "AutoscalerOptions.idleTimeoutSeconds": "Seconds a worker may stay idle before the "
    "autoscaler removes it.",
    "AutoscalerOptions.upscalingMode": "How fast the autoscaler adds workers.",
    "AutoscalerOptions.version": "Which Ray autoscaler generation runs.",
    "AutoscalerOptions.env": "Extra environment variables of the autoscaler container.",
    "AutoscalerOptions.envFrom": "Extra environment sources of the autoscaler container.",
    "AutoscalerOptions.volumeMounts": "Volume mounts of the autoscaler container.",
    "AutoscalerOptions.command": "Overrides the autoscaler container's command.",
    "AutoscalerOptions.args": "Overrides the autoscaler container's arguments.",
    # GCS fault tolerance
    "GcsFaultToleranceOptions.backend": "`redis` (external Redis) or `rocksdb` (embedded "
    "storage on a volume, GCSFaultToleranceEmbeddedStorage gate).",
    "GcsFaultToleranceOptions.redisUsername": "The Redis user name.",
    "GcsFaultToleranceOptions.redisPassword": "The Redis password.",
    "GcsFaultToleranceOptions.externalStorageNamespace": "Key prefix of the cluster's data in "
    "Redis; default: the RayCluster's UID.",
    "GcsFaultToleranceOptions.redisAddress": "Address (`host:port`) of the Redis server.",
    "GcsFaultToleranceOptions.storage": "The volume of the embedded storage (`rocksdb`).",
    "RedisCredential.valueFrom": "Read the value from a Secret or ConfigMap key.",
    "RedisCredential.value": "The value itself.",
    "GcsEmbeddedStorage.claimName": "Use this existing PersistentVolumeClaim.",
    "GcsEmbeddedStorage.size": "Size of the claim the operator creates.",
    "GcsEmbeddedStorage.storageClassName": "StorageClass of the claim the operator creates.",
    "GcsEmbeddedStorage.accessModes": "Access modes of the claim the operator creates.",
    "GcsEmbeddedStorage.subPath": "Directory inside the volume.",
    "GcsEmbeddedStorage.deletionPolicy": "Whether the created claim is deleted with the cluster.",
    # History server
    "HistoryServerOptions.collectorOptions": "The collector container.",
    "CollectorOptions.image": "Image of the collector container.",
    "CollectorOptions.imagePullPolicy": "Pull policy of the collector container.",
    "CollectorOptions.resources": "Resources of the collector container.",
    "CollectorOptions.env": "Environment variables of the collector container.",
    # Network policy
    "NetworkPolicyConfig.mode": "Which directions are denied by default: both, ingress only or "
    "egress only. Traffic inside the cluster stays allowed.",
    "NetworkPolicyConfig.head": "Extra rules for the head pod.",
    "NetworkPolicyConfig.worker": "Extra rules for every worker pod.",
    "NetworkPolicyConfig.workerGroups": "Extra rules for named worker groups.",
    "NetworkPolicyRules.ingressRules": "Additional allowed incoming traffic.",
    "NetworkPolicyRules.egressRules": "Additional allowed outgoing traffic.",
    "WorkerGroupNetworkPolicy.groupName": "The worker group the rules apply to.",
    "WorkerGroupNetworkPolicy.ingressRules": "Additional allowed incoming traffic.",
    "WorkerGroupNetworkPolicy.egressRules": "Additional allowed outgoing traffic.",
    "TLSOptions.enabled": "Turn on mutual TLS between the cluster's Ray processes.",
    # Head group
    "HeadGroupSpec.template": "Pod template of the head pod; the first container runs Ray.",
    "HeadGroupSpec.headService": "A Service to use as the head Service's base instead of the "
    "operator's default.",
    "HeadGroupSpec.enableIngress": "Create an Ingress for the dashboard.",
    "HeadGroupSpec.ingressOptions": "Host, path and TLS of that Ingress.",
    "HeadGroupSpec.resources": "Ray resources advertised by the head, overriding what the "
    "container's resources imply (`--resources`, `--num-cpus`, ...).",
    "HeadGroupSpec.labels": "Ray node labels of the head (`--labels`).",
    "HeadGroupSpec.rayStartParams": "Extra `ray start` options, without leading dashes.",
    "HeadGroupSpec.serviceType": "Type of the head Service (ClusterIP when unset).",
    "IngressOptions.host": "Host of the Ingress rule.",
    "IngressOptions.path": "Path of the Ingress rule.",
    "IngressOptions.pathType": "Path type of the Ingress rule.",
    "IngressOptions.tls": "TLS settings of the Ingress.",
    # Worker group
    "WorkerGroupSpec.suspend": "True deletes the group's pods (the group is kept).",
    "WorkerGroupSpec.groupName": "Name of the group, unique in the cluster.",
    "WorkerGroupSpec.replicas": "Desired number of replicas (each `numOfHosts` pods), kept "
    "between minReplicas and maxReplicas.",
    "WorkerGroupSpec.minReplicas": "Lower bound of replicas.",
    "WorkerGroupSpec.maxReplicas": "Upper bound of replicas.",
    "WorkerGroupSpec.idleTimeoutSeconds": "Per-group idle timeout of the autoscaler (v2).",
    "WorkerGroupSpec.priority": "Relative priority of the group, for consumers such as the "
    "autoscaler; the operator itself does not act on it.",
    "WorkerGroupSpec.resources": "Ray resources advertised by each worker.",
    "WorkerGroupSpec.labels": "Ray node labels of each worker.",
    "WorkerGroupSpec.rayStartParams": "Extra `ray start` options, without leading dashes.",
    "WorkerGroupSpec.template": "Pod template of the group's pods; the first container runs Ray.",
    "WorkerGroupSpec.scaleStrategy": "Which pods to remove on the next scale-down.",
    "WorkerGroupSpec.numOfHosts": "Pods per replica (multi-host replicas, e.g. TPU slices).",
    "ScaleStrategy.workersToDelete": "Names of worker pods to delete (the whole replica, in "
    "multi-host groups).",
    # RayClusterStatus
    "RayClusterStatus.state": "`ready`, `failed`, `suspended` or empty; deprecated in "
    "favour of conditions.",
    "RayClusterStatus.desiredCPU": "CPUs requested by all desired pods.",
    "RayClusterStatus.desiredMemory": "Memory requested by all desired pods.",
    "RayClusterStatus.desiredGPU": "GPUs requested by all desired pods.",
    "RayClusterStatus.desiredTPU": "TPUs requested by all desired pods.",
    "RayClusterStatus.lastUpdateTime": "When the operator last changed the status.",
    "RayClusterStatus.stateTransitionTimes": "When each state was last entered.",
    "RayClusterStatus.endpoints": "Head Service port names and numbers.",
    "RayClusterStatus.head": "The head pod and Service.",
    "RayClusterStatus.reason": "Why the last reconcile failed, if it did.",
    "RayClusterStatus.conditions": "`HeadPodReady`, `RayClusterProvisioned`, `ReplicaFailure`, "
    "`RayClusterSuspending` and `RayClusterSuspended` (RayClusterStatusConditions gate).",
    "RayClusterStatus.readyWorkerReplicas": "Worker pods that are running and ready.",
    "RayClusterStatus.availableWorkerReplicas": "Worker pods that are running.",
    "RayClusterStatus.desiredWorkerReplicas": "Worker pods the spec asks for.",
    "RayClusterStatus.minWorkerReplicas": "Sum of the groups' minimum pods.",
    "RayClusterStatus.maxWorkerReplicas": "Sum of the groups' maximum pods.",
    "RayClusterStatus.observedGeneration": "The spec generation this status describes.",
    "HeadInfo.podIP": "IP of the head pod.",
    "HeadInfo.serviceIP": "Cluster IP of the head Service.",
    "HeadInfo.podName": "Name of the head pod.",
    "HeadInfo.serviceName": "Name of the head Service.",
    # RayJobSpec
    "RayJobSpec.activeDeadlineSeconds": "Seconds the job may run before it is failed with "
    "`DeadlineExceeded`.",
    "RayJobSpec.backoffLimit": "Retries of the whole job on a new cluster after a failure.",
    "RayJobSpec.rayClusterSpec": "The cluster created for this job.",
    "RayJobSpec.submitterPodTemplate": "Pod template of the submitter (K8sJobMode) or of the "
    "submitter sidecar.",
    "RayJobSpec.metadata": "Metadata passed to the Ray job API with the submission.",
    "RayJobSpec.clusterSelector": "Labels of an existing RayCluster to run on instead of "
    "creating one.",
    "RayJobSpec.submitterConfig": "Settings of the submitter Job.",
    "RayJobSpec.managedBy": "The controller responsible for this object (see RayClusterSpec).",
    "RayJobSpec.deletionStrategy": "What is deleted after the job ends, and when.",
    "RayJobSpec.entrypoint": "The command the job runs.",
    "RayJobSpec.runtimeEnvYAML": "The job's Ray runtime environment, as YAML.",
    "RayJobSpec.jobId": "Submission ID to use; default: the RayJob's name plus a random suffix.",
    "RayJobSpec.submissionMode": "How the job is submitted: `K8sJobMode` (a submitter Job), "
    "`HTTPMode` (the operator calls the dashboard), `InteractiveMode` (the user submits), "
    "`SidecarMode` (a container in the head pod).",
    "RayJobSpec.entrypointResources": "Custom Ray resources of the entrypoint, as JSON.",
    "RayJobSpec.entrypointNumCpus": "CPUs reserved for the entrypoint.",
    "RayJobSpec.entrypointNumGpus": "GPUs reserved for the entrypoint.",
    "RayJobSpec.ttlSecondsAfterFinished": "Seconds to wait after the job ends before deleting "
    "the cluster (with shutdownAfterJobFinishes).",
    "RayJobSpec.preRunningDeadlineSeconds": "Seconds the job may take to reach Running before "
    "it is failed.",
    "RayJobSpec.shutdownAfterJobFinishes": "Delete the cluster once the job ends.",
    "RayJobSpec.suspend": "True deletes the cluster and submitter and stops the job; false "
    "starts it again (used by Kueue).",
    "SubmitterConfig.backoffLimit": "backoffLimit of the submitter Job (default 2).",
    "DeletionStrategy.onSuccess": "Legacy: the policy after the job succeeded.",
    "DeletionStrategy.onFailure": "Legacy: the policy after the job failed.",
    "DeletionStrategy.deletionRules": "Rules, each with a condition and a delay.",
    "DeletionPolicy.policy": "What to delete: the cluster, its workers, the RayJob itself, or "
    "nothing.",
    "DeletionRule.policy": "What to delete.",
    "DeletionRule.condition": "When to delete it.",
    "DeletionCondition.jobStatus": "Fire when the job ends with this status.",
    "DeletionCondition.jobDeploymentStatus": "Fire when the deployment reaches this status.",
    "DeletionCondition.ttlSeconds": "Seconds to wait after the condition holds.",
    # RayJobStatus
    "RayJobStatus.rayJobInfo": "Start and end time as Ray reports them.",
    "RayJobStatus.jobId": "The Ray submission ID.",
    "RayJobStatus.rayClusterName": "The cluster the job runs on.",
    "RayJobStatus.dashboardURL": "Dashboard address used to submit and poll the job.",
    "RayJobStatus.jobStatus": "The Ray job's status: `PENDING`, `RUNNING`, `STOPPED`, "
    "`SUCCEEDED` or `FAILED`.",
    "RayJobStatus.jobDeploymentStatus": "The operator's phase: empty (new), `Initializing`, "
    "`Running`, `Complete`, `Failed`, `ValidationFailed`, `Suspending`, `Suspended`, "
    "`Retrying` or `Waiting`.",
    "RayJobStatus.reason": "Why the job failed (e.g. `DeadlineExceeded`, `SubmissionFailed`).",
    "RayJobStatus.message": "Human-readable detail of the status.",
    "RayJobStatus.startTime": "When the operator started working on the job.",
    "RayJobStatus.endTime": "When the job reached a terminal state.",
    "RayJobStatus.succeeded": "Number of successful attempts.",
    "RayJobStatus.failed": "Number of failed attempts.",
    "RayJobStatus.rayClusterStatus": "A copy of the cluster's status.",
    "RayJobStatus.jobStatusCheckFailureStartTime": "Since when the dashboard could not be "
    "queried for the job's status.",
    "RayJobStatus.observedGeneration": "The spec generation this status describes.",
    "RayJobStatus.conditions": "Beyond upstream: conditions such as the cluster's provisioning "
    "stall reason while the job is Initializing.",
    "RayJobInfo.startTime": "When Ray started the job.",
    "RayJobInfo.endTime": "When Ray finished the job.",
    # RayService
    "RayServiceSpec.rayClusterDeletionDelaySeconds": "Seconds an old cluster is kept after a "
    "switch-over (default 60).",
    "RayServiceSpec.serviceUnhealthySecondThreshold": "Deprecated; ignored.",
    "RayServiceSpec.deploymentUnhealthySecondThreshold": "Deprecated; ignored.",
    "RayServiceSpec.serveService": "A Service to use as the serve Service's base.",
    "RayServiceSpec.upgradeStrategy": "How cluster spec changes are rolled out.",
    "RayServiceSpec.managedBy": "The controller responsible for this object.",
    "RayServiceSpec.serveConfigV2": "The Serve config (YAML) deployed to the cluster.",
    "RayServiceSpec.rayClusterConfig": "The cluster serving the applications.",
    "RayServiceSpec.excludeHeadPodFromServeSvc": "Do not route serve traffic to the head pod.",
    "RayServiceSpec.suspend": "True deletes the service's clusters; false recreates them.",
    "RayServiceUpgradeStrategy.type": "`NewCluster` (blue/green, the default), "
    "`NewClusterWithIncrementalUpgrade` (gradual traffic shift) or `None` (no upgrade).",
    "RayServiceUpgradeStrategy.clusterUpgradeOptions": "Settings of the incremental upgrade.",
    "ClusterUpgradeOptions.maxSurgePercent": "Capacity the new cluster may add per step, in "
    "percent.",
    "ClusterUpgradeOptions.stepSizePercent": "Traffic moved to the new cluster per step, in "
    "percent.",
    "ClusterUpgradeOptions.intervalSeconds": "Seconds between steps.",
    "ClusterUpgradeOptions.gatewayClassName": "GatewayClass of the Gateway the operator creates.",
    "RayServiceStatuses.conditions": "`Ready`, `UpgradeInProgress`, `RollbackInProgress`, "
    "`Suspending` and `Suspended`.",
    "RayServiceStatuses.lastUpdateTime": "When the operator last changed the status.",
    "RayServiceStatuses.serviceStatus": "Deprecated summary: `Running` once serving.",
    "RayServiceStatuses.activeServiceStatus": "The cluster serving traffic.",
    "RayServiceStatuses.pendingServiceStatus": "The cluster being prepared by an upgrade.",
    "RayServiceStatuses.numServeEndpoints": "Pods behind the serve Service.",
    "RayServiceStatuses.observedGeneration": "The spec generation this status describes.",
    "RayServiceStatus.applicationStatuses": "Status of each Serve application, by name.",
    "RayServiceStatus.targetCapacity": "Serve target capacity set on this cluster, in percent "
    "(incremental upgrade).",
    "RayServiceStatus.trafficRoutedPercent": "Share of traffic routed to this cluster "
    "(incremental upgrade).",
    "RayServiceStatus.lastTrafficMigratedTime": "When traffic last moved (incremental upgrade).",
    "RayServiceStatus.rayClusterName": "Name of the RayCluster.",
    "RayServiceStatus.rayClusterStatus": "A copy of that cluster's status.",
    "AppStatus.serveDeploymentStatuses": "Status of each deployment of the application.",
    "AppStatus.status": "The application's status as Serve reports it (e.g. `RUNNING`).",
    "AppStatus.message": "Serve's message for the application.",
    "ServeDeploymentStatus.status": "The deployment's status (e.g. `HEALTHY`).",
    "ServeDeploymentStatus.message": "Serve's message for the deployment.",
    # RayCronJob
    "RayCronJobSpec.jobTemplate": "The spec of each RayJob created.",
    "RayCronJobSpec.schedule": "Cron schedule (five fields, or a descriptor such as `@hourly`).",
    "RayCronJobSpec.timeZone": "IANA time zone of the schedule; default: the operator's.",
    "RayCronJobSpec.suspend": "True stops creating new RayJobs.",
    "RayCronJobStatus.lastScheduleTime": "When a RayJob was last created.",
}
