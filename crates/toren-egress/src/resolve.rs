//! Name resolution as a seam: the proxy resolves names itself (the sandbox has no DNS),
//! through a [`Resolver`]. [`SystemResolver`] is the operator's resolver; tests supply one
//! that maps test names to loopback listeners. Whatever a resolver returns, the proxy
//! still refuses forbidden addresses (see `address`), except the exact socket addresses a
//! test lists in [`crate::ProxyConfig::permit`].

use std::io;
use std::net::SocketAddr;

/// Turns a host name and port into addresses to try.
#[async_trait::async_trait]
pub trait Resolver: Send + Sync + 'static {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The system's resolver (`getaddrinfo` through tokio).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}
