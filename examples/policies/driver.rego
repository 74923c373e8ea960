# Every training pool on an approved driver branch (data.gpuctl.approved_driver_branches): the
# pool's own driver when it overrides the cluster's, else spec.gpuOperator.driver.
package main

import data.lib.gpuctl
import rego.v1

deny_training_driver_branch contains result if {
	some bp in gpuctl.blueprints
	spec := bp.document.spec
	some i, pool in spec.nodePools
	pool.role == "training"
	[version, path] := pool_driver(spec, i, pool)
	branch := split(version, ".")[0]
	not branch in data.gpuctl.approved_driver_branches
	result := {
		"msg": sprintf("training pool %s runs driver %s (branch %s), not an approved branch %v", [pool.name, version, branch, data.gpuctl.approved_driver_branches]),
		"_loc": gpuctl.loc(bp, path),
		"path": path,
	}
}

pool_driver(_, i, pool) := [pool.driver.version, sprintf("spec.nodePools[%d].driver.version", [i])] if {
	pool.driver.version
}

pool_driver(spec, _, pool) := [spec.gpuOperator.driver.version, "spec.gpuOperator.driver.version"] if {
	not pool.driver.version
}
