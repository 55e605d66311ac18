//! The client of the command line's URL, with `REDISLOCK_PASSWORD` put in place of the URL's
//! password, so that a password never has to be on the command line.

use redislock::Client;

use crate::args::Connection;
use crate::exit::Failure;

/// The environment variable whose password overrides the URL's.
pub const PASSWORD_ENV: &str = "REDISLOCK_PASSWORD";

/// A client for `conn`, its lease `lease` and auto-renewal as given.
pub fn client(
    conn: &Connection,
    lease: std::time::Duration,
    renew: bool,
) -> Result<Client, Failure> {
    let url = match std::env::var(PASSWORD_ENV) {
        Ok(password) if !password.is_empty() => with_password(&conn.url, &password),
        _ => conn.url.clone(),
    };
    let t = conn.timeout;
    Ok(Client::builder(&url)
        .connect_timeout(t)
        .read_timeout(t)
        .write_timeout(t)
        .checkout_timeout(t + std::time::Duration::from_secs(1))
        .release_timeout(conn.release_timeout)
        .key_prefix(&conn.prefix)
        .lease(lease)
        .auto_renew(renew)
        .build()?)
}

/// `url` with `password` (percent-encoded) as its password, the user kept: in the authority of
/// a network URL (`scheme://[user[:password]@]hosts/...`), as `pass=` in the query of a
/// `unix://` one. A URL without `://` is returned as it is (its error comes from the library).
pub fn with_password(url: &str, password: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let encoded = encode(password);
    if url.starts_with("unix:") || url.starts_with("redis+unix:") {
        let sep = if url.contains('?') { '&' } else { '?' };
        return match url.find('#') {
            Some(hash) => format!("{}{sep}pass={encoded}{}", &url[..hash], &url[hash..]),
            None => format!("{url}{sep}pass={encoded}"),
        };
    }
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let authority = &url[start..end];
    let (user, hosts) = match authority.rfind('@') {
        Some(at) => {
            let info = &authority[..at];
            (info.split(':').next().unwrap_or(""), &authority[at + 1..])
        }
        None => ("", authority),
    };
    format!("{}{user}:{encoded}@{hosts}{}", &url[..start], &url[end..])
}

/// Percent-encoding of everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::with_password;

    #[test]
    fn the_password_replaces_the_urls() {
        assert_eq!(
            with_password("redis://h:1/0", "p@ss"),
            "redis://:p%40ss@h:1/0"
        );
        assert_eq!(
            with_password("redis://bob:old@h:1", "new"),
            "redis://bob:new@h:1"
        );
        assert_eq!(
            with_password("redis-sentinel://a:1,b:2/0#mymaster", "x"),
            "redis-sentinel://:x@a:1,b:2/0#mymaster"
        );
        assert_eq!(
            with_password("redlock://u@a:1,b:2,c:3", "x"),
            "redlock://u:x@a:1,b:2,c:3"
        );
        assert_eq!(
            with_password("unix:///tmp/r.sock", "x"),
            "unix:///tmp/r.sock?pass=x"
        );
        assert_eq!(with_password("nonsense", "x"), "nonsense");
    }
}
