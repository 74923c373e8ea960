//! PriorityClasses: value range, reserved prefix, one global default (GPU060-GPU062).

use crate::validate::Ctx;

pub(super) fn check(ctx: &mut Ctx<'_>) {
    let limits = ctx.catalog.limits();
    let (max, min, prefix) = (
        limits.priority_class.max_user_value,
        limits.priority_class.min_value,
        limits.priority_class.reserved_name_prefix.clone(),
    );
    let mut first_default: Option<(usize, &str)> = None;
    for (i, pc) in ctx.bp.spec.priority_classes.iter().enumerate() {
        if pc.value > max || pc.value < min {
            ctx.emit(
                "GPU060",
                format!("spec.priorityClasses[{i}].value"),
                format!(
                    "priority {} is outside the range for user classes ({min} to {max})",
                    pc.value
                ),
                format!("use at most {max}; higher values are reserved for system classes"),
            );
        }
        if pc.name.starts_with(prefix.as_str()) {
            ctx.emit(
                "GPU061",
                format!("spec.priorityClasses[{i}].name"),
                format!("`{}` uses the reserved `{prefix}` prefix", pc.name),
                "rename the class",
            );
        }
        if pc.global_default {
            match first_default {
                None => first_default = Some((i, &pc.name)),
                Some((j, other)) => ctx.emit(
                    "GPU062",
                    format!("spec.priorityClasses[{i}].globalDefault"),
                    format!("`{}` and `{other}` (spec.priorityClasses[{j}]) are both the global default", pc.name),
                    "keep `globalDefault: true` on one class",
                ),
            }
        }
    }
}
