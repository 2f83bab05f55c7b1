//! The run's CA vouches for its hosts and for nothing else: no other name, and no IP
//! address of either family, checked by the same verifier (webpki, through rustls) a
//! client that enforces name constraints uses.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{ServerName, UnixTime};

use super::{RunCa, provider};

/// What a client trusting only `ca` says of a leaf `ca` signed for `leaf_for`, presented
/// for `server`.
fn verify(ca: &RunCa, leaf_for: &str, server: &str) -> Result<(), String> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.issuer.der().clone()).unwrap();
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .unwrap();
    let (chain, _) = ca.leaf(leaf_for).unwrap();
    let server = ServerName::try_from(server.to_owned()).unwrap();
    verifier
        .verify_server_cert(&chain[0], &chain[1..], &server, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

#[test]
fn the_ca_vouches_for_its_hosts_only_and_never_for_an_address() {
    let ca = RunCa::generate(&["api.test".to_owned()]).unwrap();
    assert_eq!(verify(&ca, "api.test", "api.test"), Ok(()));

    let refused = |leaf: &str| {
        let error = verify(&ca, leaf, leaf).expect_err(leaf);
        assert!(
            error.contains("NameConstraint"),
            "{leaf} must be refused by the name constraints, got {error}"
        );
    };
    // Another name.
    refused("other.test");
    // Addresses of both families: loopback, the metadata address, a public one, any.
    for address in [
        "127.0.0.1",
        "169.254.169.254",
        "203.0.113.7",
        "0.0.0.0",
        "::1",
        "2001:db8::7",
        "::ffff:127.0.0.1",
    ] {
        refused(address);
    }
}

#[test]
fn the_exclusions_are_all_of_ipv4_and_ipv6() {
    let ca = RunCa::generate(&["api.test".to_owned()]).unwrap();
    let der = ca.issuer.der().to_vec();
    // iPAddress [7] of the excluded subtrees [1]: 0.0.0.0/0 (address and mask, 8 zero
    // bytes) and ::/0 (32 zero bytes).
    let v4 = [&[0x30, 0x0a, 0x87, 0x08][..], &[0; 8]].concat();
    let v6 = [&[0x30, 0x22, 0x87, 0x20][..], &[0; 32]].concat();
    let contains = |needle: &[u8]| der.windows(needle.len()).any(|w| w == needle);
    assert!(contains(&v4), "0.0.0.0/0 is excluded");
    assert!(contains(&v6), "::/0 is excluded");
}
