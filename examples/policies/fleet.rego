# No fleet wave without a bake time: every wave that another follows must set `bake`, so a bad
# revision runs for a while on its clusters before the next wave starts (docs/fleet.md). The last
# wave gates nothing; its bake is optional.
package main

import data.lib.gpuctl
import rego.v1

deny_wave_without_bake contains result if {
	waves := input.fleet.document.spec.waves
	some i, wave in waves
	i < count(waves) - 1
	not wave.bake
	result := {
		"msg": sprintf("fleet wave %s has no bake time: wave %s starts as soon as it converges", [wave.name, waves[i + 1].name]),
		"_loc": gpuctl.loc(input.fleet, sprintf("spec.waves[%d]", [i])),
		"path": sprintf("spec.waves[%d].bake", [i]),
	}
}

warn_last_wave_without_bake contains sprintf("fleet wave %s (the last) has no bake time: no wave waits for it, but nothing watches it settle either", [wave.name]) if {
	waves := input.fleet.document.spec.waves
	count(waves) > 0
	wave := waves[count(waves) - 1]
	not wave.bake
}
