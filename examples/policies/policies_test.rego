# The example policies' own tests: `gpuctl policy test examples/policies` (or `conftest verify -p
# examples/policies -d examples/policies/data`).
package main

import rego.v1

blueprint_of(spec) := {"file": "bp.yaml", "document": {"spec": spec}, "locations": {"spec.gpuOperator.driver.version": {"file": "base.yaml", "line": 15}}}

h100_spec(tenant, gpus) := {
	"gpuOperator": {"driver": {"version": "580.173.02"}},
	"nodePools": [{"name": "h100-train", "role": "training", "gpu": {"model": "H100-SXM5-80GB"}}],
	"scheduling": {"kueue": {"clusterQueues": [{"name": "cq", "resources": [{"pool": "h100-train", "quota": {"nvidia.com/gpu": gpus}}]}]}},
	"tenants": [{"name": tenant, "queue": "cq"}],
}

test_dev_tenant_over_64_h100_is_denied if {
	count(deny_dev_h100_quota) == 1 with input as {"blueprint": blueprint_of(h100_spec("dev-research", 128))}
}

test_dev_tenant_at_64_h100_passes if {
	count(deny_dev_h100_quota) == 0 with input as {"blueprint": blueprint_of(h100_spec("dev-research", "64"))}
}

test_prod_tenant_over_64_passes if {
	count(deny_dev_h100_quota) == 0 with input as {"blueprint": blueprint_of(h100_spec("team-a", 128))}
}

test_training_pool_on_unapproved_branch_is_denied if {
	spec := object.union(h100_spec("team-a", 8), {"gpuOperator": {"driver": {"version": "575.57.08"}}})
	some r in deny_training_driver_branch with input as {"blueprint": blueprint_of(spec)}
	r._loc == {"file": "base.yaml", "line": 15}
}

test_pool_override_on_approved_branch_passes if {
	spec := object.union(h100_spec("team-a", 8), {"nodePools": [{"name": "h100-train", "role": "training", "gpu": {"model": "H100-SXM5-80GB"}, "driver": {"version": "580.95.05"}}]})
	count(deny_training_driver_branch) == 0 with input as {"blueprint": blueprint_of(spec)}
}

test_fleet_wave_without_bake_is_denied if {
	waves := [{"name": "canary", "bake": "24h"}, {"name": "us"}, {"name": "rest"}]
	results := deny_wave_without_bake with input as {"fleet": {"file": "fleet.yaml", "document": {"spec": {"waves": waves}}}}
	count(results) == 1
	some r in results
	r.path == "spec.waves[1].bake"
}

test_fleet_clusters_are_checked_too if {
	count(deny_dev_h100_quota) == 1 with input as {"clusters": [{"name": "a", "blueprint": blueprint_of(h100_spec("dev-x", 65))}]}
}
