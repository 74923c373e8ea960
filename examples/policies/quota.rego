# No H100 quota above the limit for a dev tenant: a dev tenant's ClusterQueue may hold at most
# data.gpuctl.dev_h100_gpu_limit (64) nvidia.com/gpu on a pool of H100 GPUs.
package main

import data.lib.gpuctl
import rego.v1

dev_tenant(t) if t.name in data.gpuctl.dev_tenants

dev_tenant(t) if startswith(t.name, "dev-")

deny_dev_h100_quota contains result if {
	some bp in gpuctl.blueprints
	spec := bp.document.spec
	some t in spec.tenants
	dev_tenant(t)
	some i, cq in spec.scheduling.kueue.clusterQueues
	cq.name == t.queue
	some j, r in cq.resources
	some pool in spec.nodePools
	pool.name == r.pool
	startswith(pool.gpu.model, "H100")
	gpus := to_number(r.quota["nvidia.com/gpu"])
	gpus > data.gpuctl.dev_h100_gpu_limit
	path := sprintf("spec.scheduling.kueue.clusterQueues[%d].resources[%d].quota", [i, j])
	result := {
		"msg": sprintf("tenant %s: nvidia.com/gpu quota %v on H100 pool %s is over %v for a dev tenant", [t.name, gpus, pool.name, data.gpuctl.dev_h100_gpu_limit]),
		"_loc": gpuctl.loc(bp, path),
		"path": path,
	}
}
