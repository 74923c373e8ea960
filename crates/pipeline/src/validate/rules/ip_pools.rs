//! NVIDIA IPAM address pools (GPU160-GPU164): the `networkOperator.ipPools` and the implicit pool
//! of `secondaryNetwork.range`, checked as nv-ipam's own webhook and allocator would (the
//! webhook is off under the Network Operator's example policy, and a bare API server takes any
//! string), plus what only the blueprint knows: how many nodes each pool serves, and the cluster's
//! pod and Service ranges. The limits come from `profiles/network.yaml` (`nv_ipam`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use super::is_dns_label;
use crate::validate::Ctx;
use gpuctl_model::blueprint::yaml::shorten;
use gpuctl_model::blueprint::{Blueprint, Fabric, IpPool, IpPoolKind, NetworkOperator, NodePool};
use gpuctl_model::profiles::network::NvIpamFacts;

const BASE: &str = "spec.networkOperator";

pub(super) fn check(ctx: &mut Ctx<'_>) {
    let cluster = cluster_ranges(ctx);
    let Some(no) = ctx.bp.spec.network_operator.clone() else {
        return;
    };
    let facts = ctx.catalog.network().nv_ipam.clone();
    let pools = no.pools();
    references(ctx, &no, &pools);
    let mut parsed: Vec<(String, String, IpNet)> = Vec::new();
    for (path, pool) in &pools {
        fields(ctx, path, pool);
        let Some(net) = range(ctx, path, pool) else {
            continue;
        };
        exclusions(ctx, path, pool, net);
        gateway(ctx, path, pool, net, &facts);
        capacity(ctx, path, pool, net, &facts);
        parsed.push((path.clone(), pool.name.clone(), net));
    }
    overlaps(ctx, &parsed, &cluster);
}

/// The node pools an nv-ipam pool serves: those it names, else the pools with an InfiniBand or
/// RoCE network (where the NicClusterPolicy runs the NIC components). Render writes their
/// selectors as the pool's `nodeSelector`; GPU162 counts their nodes.
pub fn ip_pool_nodes<'a>(bp: &'a Blueprint, pool: &IpPool) -> Vec<&'a NodePool> {
    bp.spec
        .node_pools
        .iter()
        .filter(|p| {
            if pool.node_pools.is_empty() {
                p.topology
                    .as_ref()
                    .and_then(|t| t.network.as_ref())
                    .is_some_and(|n| n.fabric != Fabric::Ethernet)
            } else {
                pool.node_pools.contains(&p.name)
            }
        })
        .collect()
}

/// An IPv4 or IPv6 CIDR, or why it is not one.
pub(crate) fn parse_cidr(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    if !s.contains('/') {
        return Err(format!(
            "`{}` has no prefix length (write it as a CIDR, e.g. `192.168.100.0/24`)",
            shorten(s)
        ));
    }
    s.parse::<IpNet>()
        .map_err(|_| format!("`{}` is not an IPv4 or IPv6 CIDR", shorten(s)))
}

/// Host bits of the network's addresses (`32 - prefix` or `128 - prefix`).
fn host_bits(net: IpNet) -> u32 {
    u32::from(net.max_prefix_len() - net.prefix_len())
}

/// `2^bits`, saturating at `u128::MAX` (an IPv6 /0).
fn pow2(bits: u32) -> u128 {
    1u128.checked_shl(bits).unwrap_or(u128::MAX)
}

/// Addresses nv-ipam can hand out in `net` (its `GetPossibleIPCount`): all but the network
/// address (and the IPv4 broadcast), except that a point-to-point network has 2 and a single
/// address 1.
fn usable(net: IpNet, facts: &NvIpamFacts) -> u128 {
    match host_bits(net) {
        0 => 1,
        1 => 2,
        h => {
            let reserved = match net {
                IpNet::V4(_) => facts.reserved_addresses.ipv4,
                IpNet::V6(_) => facts.reserved_addresses.ipv6,
            };
            pow2(h).saturating_sub(u128::from(reserved))
        }
    }
}

/// The cluster's pod and Service ranges, when declared (GPU160 for a value that is no CIDR).
fn cluster_ranges(ctx: &mut Ctx<'_>) -> Vec<(String, &'static str, IpNet)> {
    let k = ctx.bp.spec.kubernetes.clone();
    let mut out = Vec::new();
    for (field, what, value) in [
        ("podCIDR", "pod", k.pod_cidr),
        ("serviceCIDR", "Service", k.service_cidr),
    ] {
        let Some(value) = value else { continue };
        let path = format!("spec.kubernetes.{field}");
        let parts: Vec<&str> = value.split(',').map(str::trim).collect();
        if parts.len() > 2 {
            ctx.emit(
                "GPU160",
                &path,
                format!(
                    "`{field}` lists {} ranges; a cluster has one per address family, at most two",
                    parts.len()
                ),
                "write one CIDR, or an IPv4 and an IPv6 CIDR separated by a comma",
            );
            continue;
        }
        for part in parts {
            match parse_cidr(part) {
                Ok(net) => out.push((path.clone(), what, net.trunc())),
                Err(message) => ctx.emit(
                    "GPU160",
                    &path,
                    message,
                    format!("write the cluster's {what} range as the control plane has it, e.g. `10.96.0.0/12`"),
                ),
            }
        }
    }
    out
}

/// GPU164: pool names are DNS-1123 labels and unique, node pools and networks name what exists,
/// and the secondary network gives exactly one of `range` and `ipPool`.
fn references(ctx: &mut Ctx<'_>, no: &NetworkOperator, pools: &[(String, IpPool)]) {
    let label_max = ctx
        .catalog
        .limits()
        .kubernetes_names
        .dns1123_label_max_length;
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (path, pool) in pools {
        if !is_dns_label(&pool.name, label_max) {
            ctx.emit(
                "GPU164",
                format!("{path}.name"),
                format!(
                    "pool name `{}` is not a DNS-1123 label",
                    shorten(&pool.name)
                ),
                "use lower-case letters, digits and `-` (it names the IPPool or CIDRPool object)",
            );
        }
        if let Some(first) = seen.insert(&pool.name, path) {
            ctx.emit(
                "GPU164",
                format!("{path}.name"),
                format!("two nv-ipam pools are named `{}` (the other at `{first}`)", shorten(&pool.name)),
                "give each pool its own name (a secondary network's `range` makes a pool named after the network: use `ipPool` to share one)",
            );
        }
        for (j, np) in pool.node_pools.iter().enumerate() {
            if !ctx.bp.spec.node_pools.iter().any(|p| &p.name == np) {
                ctx.emit(
                    "GPU164",
                    format!("{path}.nodePools[{j}]"),
                    format!("`{}` is not a node pool of this blueprint", shorten(np)),
                    "name a pool of `spec.nodePools`, or leave `nodePools` out to serve the InfiniBand and RoCE pools",
                );
            }
        }
    }
    let Some(sn) = &no.secondary_network else {
        return;
    };
    let sbase = format!("{BASE}.secondaryNetwork");
    match (&sn.range, &sn.ip_pool) {
        (Some(_), Some(_)) => ctx.emit(
            "GPU164",
            format!("{sbase}.ipPool"),
            "the secondary network gives both `range` (its own pool) and `ipPool`",
            "keep `ipPool` to use a declared pool, or `range` for a pool of the network's own",
        ),
        (None, None) => ctx.emit(
            "GPU164",
            sbase.clone(),
            "the secondary network has no addresses: it gives neither `range` nor `ipPool`",
            "set `range` (a CIDR), or `ipPool` to the name of a `networkOperator.ipPools` entry",
        ),
        (None, Some(name)) => {
            if !no.ip_pools.iter().any(|p| &p.name == name) {
                let known: Vec<&str> = no.ip_pools.iter().map(|p| p.name.as_str()).collect();
                ctx.emit(
                    "GPU164",
                    format!("{sbase}.ipPool"),
                    format!("`{}` is not a pool of `networkOperator.ipPools`", shorten(name)),
                    if known.is_empty() {
                        "declare the pool under `networkOperator.ipPools`, or give the network a `range`".to_string()
                    } else {
                        format!("use one of: {}", known.join(", "))
                    },
                );
            }
            if sn.per_node_block_size.is_some() {
                ctx.emit(
                    "GPU164",
                    format!("{sbase}.perNodeBlockSize"),
                    "`perNodeBlockSize` of the secondary network is only read with `range`",
                    "set `perNodeBlockSize` on the pool `ipPool` names, and remove it here",
                );
            }
        }
        (Some(_), None) => {}
    }
}

/// GPU164: a pool sets only the fields of its kind.
fn fields(ctx: &mut Ctx<'_>, path: &str, pool: &IpPool) {
    let wrong: [(&str, bool); 2] = match pool.kind {
        IpPoolKind::Ippool => [
            ("gatewayIndex", pool.gateway_index.is_some()),
            (
                "perNodeNetworkPrefix",
                pool.per_node_network_prefix.is_some(),
            ),
        ],
        IpPoolKind::Cidrpool => [
            ("gateway", pool.gateway.is_some()),
            ("perNodeBlockSize", pool.per_node_block_size.is_some()),
        ],
    };
    let (kind, other) = match pool.kind {
        IpPoolKind::Ippool => ("ippool", "cidrpool"),
        IpPoolKind::Cidrpool => ("cidrpool", "ippool"),
    };
    for (field, set) in wrong {
        if set {
            ctx.emit(
                "GPU164",
                format!("{path}.{field}"),
                format!("`{field}` is a field of a `{other}`, and pool `{}` is a `{kind}`", shorten(&pool.name)),
                match (pool.kind, field) {
                    (IpPoolKind::Ippool, "gatewayIndex") => "write the gateway's address as `gateway`",
                    (IpPoolKind::Ippool, _) => "an ippool hands out `perNodeBlockSize` addresses per node; use `kind: cidrpool` for a subnet per node",
                    (IpPoolKind::Cidrpool, "gateway") => "a cidrpool gives each node its own gateway: set `gatewayIndex` (1: each node subnet's first address)",
                    (IpPoolKind::Cidrpool, _) => "a cidrpool gives each node a subnet: set `perNodeNetworkPrefix`",
                },
            );
        }
    }
}

/// GPU160: the pool's range is a CIDR (a CIDRPool's at its network address, with room for more
/// than one address).
fn range(ctx: &mut Ctx<'_>, path: &str, pool: &IpPool) -> Option<IpNet> {
    let at = format!("{path}.range");
    let net = match parse_cidr(&pool.range) {
        Ok(net) => net,
        Err(message) => {
            ctx.emit(
                "GPU160",
                at,
                message,
                "write the pool's addresses as a CIDR, e.g. `10.210.0.0/16` or `fd00:10:210::/48`",
            );
            return None;
        }
    };
    if pool.kind == IpPoolKind::Cidrpool {
        if net != net.trunc() {
            ctx.emit(
                "GPU160",
                &at,
                format!("`{}` has host bits set; nv-ipam refuses a CIDRPool that is not written at its network address", pool.range),
                format!("write `{}`", net.trunc()),
            );
        }
        if host_bits(net) == 0 {
            ctx.emit(
                "GPU160",
                &at,
                format!(
                    "`{}` is a single address; a CIDRPool splits a range into node subnets",
                    pool.range
                ),
                "give the pool a range with room for a subnet per node",
            );
        }
    }
    Some(net.trunc())
}

/// GPU160: exclusions are addresses of the range, in order.
fn exclusions(ctx: &mut Ctx<'_>, path: &str, pool: &IpPool, net: IpNet) {
    for (j, e) in pool.exclusions.iter().enumerate() {
        let at = format!("{path}.exclusions[{j}]");
        let mut ends = Vec::new();
        for (field, value) in [("startIP", &e.start_ip), ("endIP", &e.end_ip)] {
            match value.trim().parse::<IpAddr>() {
                Ok(ip) if net.contains(&ip) => ends.push(ip),
                Ok(_) => ctx.emit(
                    "GPU160",
                    format!("{at}.{field}"),
                    format!("`{value}` is not inside the pool's range {net}"),
                    "exclude addresses of the pool's own range",
                ),
                Err(_) => ctx.emit(
                    "GPU160",
                    format!("{at}.{field}"),
                    format!("`{}` is not an IP address", shorten(value)),
                    "write a single address, e.g. `10.210.0.10`",
                ),
            }
        }
        if let [start, end] = ends[..]
            && end < start
        {
            ctx.emit(
                "GPU160",
                format!("{at}.endIP"),
                format!("the exclusion ends at {end}, before it starts ({start})"),
                "swap `startIP` and `endIP`",
            );
        }
    }
}

/// GPU161: the gateway is a host address of the range (IPPool), or an index inside the first node
/// subnet (CIDRPool); `defaultGateway` needs one.
fn gateway(ctx: &mut Ctx<'_>, path: &str, pool: &IpPool, net: IpNet, facts: &NvIpamFacts) {
    if pool.default_gateway && pool.gateway.is_none() && pool.gateway_index.is_none() {
        ctx.emit(
            "GPU161",
            format!("{path}.defaultGateway"),
            format!("pool `{}` asks for a default route but has no gateway", shorten(&pool.name)),
            match pool.kind {
                IpPoolKind::Ippool => "set `gateway` to an address of the range, or remove `defaultGateway`",
                IpPoolKind::Cidrpool => "set `gatewayIndex` (1: each node subnet's first address), or remove `defaultGateway`",
            },
        );
    }
    if let (IpPoolKind::Ippool, Some(g)) = (pool.kind, &pool.gateway) {
        let at = format!("{path}.gateway");
        match g.trim().parse::<IpAddr>() {
            Err(_) => ctx.emit(
                "GPU161",
                at,
                format!("`{}` is not an IP address", shorten(g)),
                "write the gateway's address, e.g. `10.210.0.1`",
            ),
            Ok(ip) if !net.contains(&ip) => ctx.emit(
                "GPU161",
                at,
                format!("gateway {ip} is outside the pool's range {net}"),
                format!(
                    "use an address of {net}, usually its first host ({})",
                    first_host(net)
                ),
            ),
            Ok(ip)
                if host_bits(net) > 1
                    && (ip == net.network()
                        || (matches!(net, IpNet::V4(_)) && ip == net.broadcast())) =>
            {
                ctx.emit(
                    "GPU161",
                    at,
                    format!(
                        "gateway {ip} is the {} address of {net}, which no host can have",
                        if ip == net.network() {
                            "network"
                        } else {
                            "broadcast"
                        }
                    ),
                    format!(
                        "use a host address, usually the first ({})",
                        first_host(net)
                    ),
                )
            }
            Ok(_) => {}
        }
    }
    if let (IpPoolKind::Cidrpool, Some(index), Some(prefix)) =
        (pool.kind, pool.gateway_index, pool.per_node_network_prefix)
        && let Some(node_net) = node_subnet(net, prefix)
    {
        let max = usable(node_net, facts);
        let point_to_point = host_bits(node_net) <= 1;
        if (index == 0 && !point_to_point)
            || u128::from(index) > max.saturating_sub(u128::from(point_to_point))
        {
            ctx.emit(
                "GPU161",
                format!("{path}.gatewayIndex"),
                format!("gateway index {index} is not a host address of a /{prefix} node subnet ({max} host addresses)"),
                format!("use an index from 1 to {max} (1: the subnet's first address)"),
            );
        }
    }
}

/// The first node subnet of a CIDRPool (nv-ipam checks the gateway index against it), when the
/// prefix fits.
fn node_subnet(net: IpNet, prefix: u32) -> Option<IpNet> {
    let p = u8::try_from(prefix).ok()?;
    if p < net.prefix_len() || p >= net.max_prefix_len() {
        return None;
    }
    IpNet::new(net.network(), p).ok()
}

/// The range's first host address (for hints).
fn first_host(net: IpNet) -> String {
    net.hosts()
        .next()
        .map_or_else(|| net.network().to_string(), |h| h.to_string())
}

/// GPU162: per-node blocks fit the range, and the range has a block for every node it serves.
fn capacity(ctx: &mut Ctx<'_>, path: &str, pool: &IpPool, net: IpNet, facts: &NvIpamFacts) {
    let served = ip_pool_nodes(ctx.bp, pool);
    let nodes: u128 = served.iter().map(|p| u128::from(p.nodes)).sum();
    let names: Vec<&str> = served.iter().map(|p| p.name.as_str()).collect();
    let who = if names.is_empty() {
        String::new()
    } else {
        format!(" (node pools {})", names.join(", "))
    };
    match pool.kind {
        IpPoolKind::Ippool => {
            let at = format!("{path}.perNodeBlockSize");
            let block = pool.block_size();
            let hosts = usable(net, facts);
            if block < facts.min_per_node_block_size {
                ctx.emit(
                    "GPU162",
                    at,
                    format!(
                        "`perNodeBlockSize: {block}` is below nv-ipam's minimum of {}",
                        facts.min_per_node_block_size
                    ),
                    format!(
                        "give each node at least {} addresses",
                        facts.min_per_node_block_size
                    ),
                );
            } else if u128::from(block) > hosts {
                ctx.emit("GPU162", at, format!("`perNodeBlockSize: {block}` is more than the {hosts} host addresses of {net}"), "use a smaller block, or a larger range");
            } else if nodes > 0 && u128::from(block) * nodes > hosts {
                let fits = hosts / u128::from(block);
                ctx.emit(
                    "GPU162",
                    at,
                    format!("pool `{}` serves {nodes} nodes{who} with {block} addresses each ({}), but {net} has {hosts} host addresses: only {fits} nodes get a block", shorten(&pool.name), u128::from(block) * nodes),
                    format!("use a block of at most {} addresses, or a range of at least /{}", hosts / nodes, prefix_for(u128::from(block) * nodes, net, facts)),
                );
            }
        }
        IpPoolKind::Cidrpool => {
            let at = format!("{path}.perNodeNetworkPrefix");
            let Some(prefix) = pool.per_node_network_prefix else {
                ctx.emit(
                    "GPU162",
                    at,
                    format!(
                        "cidrpool `{}` has no `perNodeNetworkPrefix`",
                        shorten(&pool.name)
                    ),
                    format!(
                        "set the prefix length of each node's subnet, longer than /{} (e.g. {})",
                        net.prefix_len(),
                        (u32::from(net.prefix_len()) + 8).min(u32::from(net.max_prefix_len()) - 1)
                    ),
                );
                return;
            };
            if prefix < u32::from(net.prefix_len()) || prefix >= u32::from(net.max_prefix_len()) {
                ctx.emit("GPU162", at, format!("`perNodeNetworkPrefix: {prefix}` must be at least the range's /{} and shorter than /{}", net.prefix_len(), net.max_prefix_len()), "use a prefix between the range's and the address length");
                return;
            }
            let subnets = pow2(prefix - u32::from(net.prefix_len()));
            if nodes > subnets {
                ctx.emit(
                    "GPU162",
                    at,
                    format!("pool `{}` serves {nodes} nodes{who}, but {net} holds only {subnets} /{prefix} node subnets", shorten(&pool.name)),
                    "use a longer `perNodeNetworkPrefix` (smaller node subnets), or a larger range",
                );
            }
        }
    }
}

/// The shortest prefix whose host addresses hold `need` in `net`'s family (for hints).
fn prefix_for(need: u128, net: IpNet, facts: &NvIpamFacts) -> u8 {
    (0..=net.max_prefix_len())
        .rev()
        .find(|p| IpNet::new(net.network(), *p).is_ok_and(|n| usable(n, facts) >= need))
        .unwrap_or(0)
}

/// GPU163: no two pools share an address, and none overlaps the cluster's pod or Service range.
fn overlaps(
    ctx: &mut Ctx<'_>,
    pools: &[(String, String, IpNet)],
    cluster: &[(String, &'static str, IpNet)],
) {
    let overlap = |a: &IpNet, b: &IpNet| a.contains(&b.network()) || b.contains(&a.network());
    // Two CIDRs either nest or are apart, so in address order (wider first at one address) a
    // pool overlaps an earlier one exactly when one of the still-open earlier ranges contains it:
    // one pass with a stack, not every pair (a hostile file may hold thousands of pools).
    let mut order: Vec<usize> = (0..pools.len()).collect();
    order.sort_by_key(|&i| (pools[i].2.network(), pools[i].2.prefix_len(), i));
    let mut open: Vec<usize> = Vec::new();
    // For each pool (the later one of a pair in blueprint order), the earlier pools it overlaps.
    let mut earlier: Vec<Vec<usize>> = vec![Vec::new(); pools.len()];
    for i in order {
        while open
            .last()
            .is_some_and(|&o| !pools[o].2.contains(&pools[i].2))
        {
            open.pop();
        }
        if let Some(&o) = open.last() {
            earlier[o.max(i)].push(o.min(i));
        }
        open.push(i);
    }
    for (i, (path, name, net)) in pools.iter().enumerate() {
        earlier[i].sort_unstable();
        for &j in &earlier[i] {
            let (_, other, onet) = &pools[j];
            ctx.emit(
                "GPU163",
                format!("{path}.range"),
                format!(
                    "pool `{}` ({net}) overlaps pool `{}` ({onet})",
                    shorten(name),
                    shorten(other)
                ),
                "give each pool its own addresses: nv-ipam would hand one address to two pods",
            );
        }
        for (cpath, what, cnet) in cluster {
            if overlap(net, cnet) {
                ctx.emit(
                    "GPU163",
                    format!("{path}.range"),
                    format!("pool `{}` ({net}) overlaps the cluster's {what} range {cnet} (`{cpath}`)", shorten(name)),
                    format!("use addresses outside {cnet}: pods would get secondary addresses the cluster routes elsewhere"),
                );
            }
        }
    }
}
