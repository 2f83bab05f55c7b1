//! Which resolved addresses the proxy refuses to connect to, whatever the name: a pure
//! function, unit-tested here, applied by `proxy` to every address a name resolves to and
//! to IP literals.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why connecting to `ip` is refused, or `None` for a public unicast address.
pub fn forbidden_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        Some("a cloud metadata address")
    } else if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a carrier-grade NAT address")
    } else if ip.is_multicast() || ip.is_broadcast() {
        Some("a multicast or broadcast address")
    } else if a >= 240
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        || (a == 198 && (b & 0xfe) == 18)
    {
        Some("a reserved address")
    } else {
        None
    }
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    // An IPv4 address in IPv6 clothing is judged as the IPv4 address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_reason(v4);
    }
    let first = ip.segments()[0];
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("a cloud metadata address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if (first & 0xfe00) == 0xfc00 {
        Some("a private (unique local) address")
    } else if (first & 0xffc0) == 0xfe80 {
        Some("a link-local address")
    } else if (first & 0xffc0) == 0xfec0 {
        // Deprecated site-local, still routed inside some networks.
        Some("a site-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if first == 0x64 && ip.segments()[1] == 0xff9b {
        // NAT64 (64:ff9b::/96) reaches IPv4 space, private ranges included.
        Some("a NAT64 address")
    } else if ip.segments()[..6] == [0; 6] {
        Some("an IPv4-compatible address")
    } else if ip.segments()[..6] == [0, 0, 0, 0, 0xffff, 0] {
        // IPv4-translated (::ffff:0:a.b.c.d, SIIT): another IPv4 address in IPv6 clothing.
        Some("an IPv4-translated address")
    } else if first == 0x2002 {
        // 6to4 embeds an IPv4 address (2002:AABB:CCDD::), private ones included.
        Some("a 6to4 address")
    } else if first == 0x0100 && ip.segments()[1..4] == [0; 3] {
        Some("a discard-only address")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_refused_and_public_ones_pass() {
        for refused in [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fd00:ec2::254",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "64:ff9b:1::a00:1",
            "fec0::1",
            "::ffff:0:7f00:1",
            "::ffff:0:a9fe:a9fe",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "100::1",
        ] {
            let ip: IpAddr = refused.parse().unwrap();
            assert!(forbidden_reason(ip).is_some(), "{refused} was allowed");
        }
        for public in ["1.1.1.1", "140.82.112.3", "100.128.0.1", "2606:4700::1111"] {
            let ip: IpAddr = public.parse().unwrap();
            assert_eq!(forbidden_reason(ip), None, "{public}");
        }
        assert_eq!(
            forbidden_reason("169.254.169.254".parse().unwrap()),
            Some("a cloud metadata address")
        );
    }
}
