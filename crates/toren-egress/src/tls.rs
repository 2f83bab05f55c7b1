//! The TLS material of secret injection: a per-run certificate authority ([`RunCa`]) that
//! signs a leaf certificate for each host the proxy intercepts, and the trust the proxy
//! uses to verify the real hosts ([`UpstreamTrust`]).
//!
//! The CA is made in memory when the run's proxy starts and its private key never leaves
//! the proxy's process: only its certificate goes to the sandbox, in a bundle beside the
//! system's roots ([`RunCa::bundle`]). It is name-constrained to the intercepted hosts, and
//! every IPv4 and IPv6 address is excluded, so even a leaked key could not vouch for any
//! other name or for an address to a client that checks constraints, and it is valid for a bounded time (30 days: a run's proxy is started
//! again, with a new CA, by every process that drives it).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CidrSubnet, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, GeneralSubtree, IsCa, KeyPair, KeyUsagePurpose, NameConstraints,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::Error;

/// How long the run's CA and its leaf certificates are valid.
const VALIDITY: Duration = Duration::from_secs(30 * 24 * 3600);

/// One run's certificate authority.
pub struct RunCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    hosts: Vec<String>,
}

impl std::fmt::Debug for RunCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("RunCa")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl RunCa {
    /// A new CA that may sign for exactly `hosts` (lower-case names) and for no IP
    /// address: permitted DNS subtrees alone leave addresses unconstrained (RFC 5280
    /// 4.2.1.10 applies a constraint only to names of its own type), so all of IPv4
    /// (`0.0.0.0/0`) and IPv6 (`::/0`) is excluded.
    pub fn generate(hosts: &[String]) -> Result<Self, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(Error::tls)?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, "Toren egress proxy, one run");
        name.push(DnType::OrganizationName, "Toren");
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: hosts
                .iter()
                .map(|host| GeneralSubtree::DnsName(host.clone()))
                .collect(),
            excluded_subtrees: vec![
                GeneralSubtree::IpAddress(CidrSubnet::V4([0; 4], [0; 4])),
                GeneralSubtree::IpAddress(CidrSubnet::V6([0; 16], [0; 16])),
            ],
        });
        validity(&mut params);
        let key = KeyPair::generate().map_err(Error::tls)?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(Error::tls)?;
        Ok(Self {
            issuer,
            hosts: hosts.to_vec(),
        })
    }

    /// The CA certificate, PEM (what the sandbox trusts).
    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A CA bundle for the sandbox: `system` (the host's roots, PEM) and the run's CA.
    pub fn bundle(&self, system: &[u8]) -> Vec<u8> {
        let mut bundle = system.to_vec();
        if !bundle.is_empty() && !bundle.ends_with(b"\n") {
            bundle.push(b'\n');
        }
        bundle.extend_from_slice(self.cert_pem().as_bytes());
        bundle
    }

    /// A server configuration presenting a fresh leaf certificate for `host` (HTTP/1.1).
    pub(crate) fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, Error> {
        let (chain, key) = self.leaf(host)?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(Error::tls)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(Error::tls)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A fresh leaf certificate for `host` signed by this CA (the chain, leaf first) and
    /// its key.
    fn leaf(
        &self,
        host: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
        let mut params = CertificateParams::new(vec![host.to_owned()]).map_err(Error::tls)?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, host);
        params.is_ca = IsCa::NoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params);
        let key = KeyPair::generate().map_err(Error::tls)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(Error::tls)?;
        let chain = vec![cert.der().clone(), self.issuer.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((chain, key))
    }
}

fn validity(params: &mut CertificateParams) {
    let now = SystemTime::now();
    // A little slack for clocks that differ between the sandbox and the host.
    params.not_before = (now - Duration::from_secs(3600)).into();
    params.not_after = (now + VALIDITY).into();
}

/// The roots the proxy verifies the real hosts against.
#[derive(Clone, Debug, Default)]
pub enum UpstreamTrust {
    /// The operator's system store (`rustls-native-certs`).
    #[default]
    System,
    /// Exactly these certificates (PEM). Tests only: the binary sets it from a clearly
    /// named test-only setting, so a test's TLS server on loopback plays the real host.
    Only(Vec<u8>),
}

impl UpstreamTrust {
    /// The client configuration for connections to intercepted hosts (HTTP/1.1).
    pub(crate) fn client_config(&self) -> Result<Arc<ClientConfig>, Error> {
        let mut roots = RootCertStore::empty();
        match self {
            Self::System => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // A root the store cannot parse is skipped, as every client does.
                    let _ = roots.add(cert);
                }
            }
            Self::Only(pem) => {
                for cert in certs_from_pem(pem)? {
                    roots.add(cert).map_err(Error::tls)?;
                }
            }
        }
        if roots.is_empty() {
            return Err(Error::Tls(
                "no root certificate to verify the hosts that get secrets".to_owned(),
            ));
        }
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(Error::tls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

fn certs_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, Error> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::tls)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
