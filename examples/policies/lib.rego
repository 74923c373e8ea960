# Helpers the example policies share (docs/policy.md): every blueprint of the input, whether it
# comes from `validate`/`plan` (input.blueprint) or `fleet plan` (input.clusters[_].blueprint).
package lib.gpuctl

import rego.v1

blueprints contains bp if {
	bp := input.blueprint
}

blueprints contains c.blueprint if {
	some c in input.clusters
}

# The file and line of a path of a blueprint, for a result's `_loc`.
loc(bp, path) := bp.locations[path]

loc(bp, path) := {"file": bp.file} if {
	not bp.locations[path]
}
