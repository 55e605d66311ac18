//! What URLs have in common: the multi-host form of the Sentinel, Cluster and Redlock URLs, and
//! the password masking every message and `Debug` output uses.

use crate::base::error::Error;

/// A URL of the form `scheme://[userinfo@]h1:p1,h2:p2[/path][?query]`, split: the form the
/// Sentinel, Cluster and Redlock URLs share (each store parses the rest of its own).
pub(crate) struct MultiHost<'a> {
    /// `redis` or `rediss`: the scheme of the plain URL of one of the hosts.
    pub scheme: &'static str,
    /// `user:password@`, or empty.
    pub userinfo: &'a str,
    /// `h1:p1,h2:p2`.
    pub hosts: &'a str,
    /// `/db`, `?query`, or empty.
    pub path: &'a str,
}

impl<'a> MultiHost<'a> {
    /// Splits `rest`, what follows `scheme://`; `tls` says which scheme the hosts speak.
    pub(crate) fn split(rest: &'a str, tls: bool) -> MultiHost<'a> {
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(at) => (&authority[..=at], &authority[at + 1..]),
            None => ("", authority),
        };
        MultiHost {
            scheme: if tls { "rediss" } else { "redis" },
            userinfo,
            hosts,
            path,
        }
    }

    /// The plain URL of one host, with the credentials and path of this one.
    pub(crate) fn plain(&self, (host, port): &(String, u16)) -> String {
        format!(
            "{}://{}{host}:{port}{}",
            self.scheme, self.userinfo, self.path
        )
    }
}

/// What follows `plain://` or `tls://` in `url`, and whether it was the TLS scheme; `None` for a
/// URL of neither scheme (each topology's parser tries its own two).
pub(crate) fn after_scheme<'a>(url: &'a str, plain: &str, tls: &str) -> Option<(bool, &'a str)> {
    let rest = |scheme: &str| url.strip_prefix(scheme)?.strip_prefix("://");
    match rest(plain) {
        Some(rest) => Some((false, rest)),
        None => rest(tls).map(|rest| (true, rest)),
    }
}

/// A URL's form, with `url` masked, as an invalid-argument error: `invalid {what} URL ...`.
pub(crate) fn invalid(what: &str, url: &str, detail: &str) -> Error {
    Error::invalid_argument(format!("invalid {what} URL {}: {detail}", mask_url(url)))
}

/// The `host:port` list of a Sentinel or Cluster URL's authority, each port `default_port`
/// when left out; `Err` says what is wrong.
pub(crate) fn host_list(
    hosts: &str,
    default_port: u16,
    what: &str,
) -> Result<Vec<(String, u16)>, String> {
    let mut list = Vec::new();
    for host in hosts.split(',') {
        let (h, p) = match host.rsplit_once(':') {
            Some((h, p)) => match p.parse::<u16>() {
                Ok(p) if p > 0 => (h, p),
                _ => return Err(format!("{what}'s port is not a number from 1 to 65535")),
            },
            None => (host, default_port),
        };
        if h.is_empty() {
            return Err(format!("{what}'s host is empty"));
        }
        list.push((h.to_owned(), p));
    }
    Ok(list)
}

/// The byte ranges of a URL that hold secrets: the password of its user info (everything after
/// the first `:` up to the last `@` of the authority, so an unencoded `@` in a password is still
/// covered) and the values of `pass` / `password` query parameters (unix socket URLs).
fn secret_ranges(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let Some(scheme_end) = url.find("://") else {
        return ranges;
    };
    let start = scheme_end + 3;
    let authority_len = url[start..]
        .find(['/', '?', '#'])
        .unwrap_or(url.len() - start);
    let authority = &url[start..start + authority_len];
    if let Some(at) = authority.rfind('@')
        && let Some(colon) = authority[..at].find(':')
        && colon + 1 < at
    {
        ranges.push(start + colon + 1..start + at);
    }
    if let Some(q) = url.find('?') {
        let mut pos = q + 1;
        for param in url[q + 1..].split(['&', '#']) {
            if let Some((name, value)) = param.split_once('=')
                && (name == "pass" || name == "password")
                && !value.is_empty()
            {
                let value_start = pos + name.len() + 1;
                ranges.push(value_start..value_start + value.len());
            }
            pos += param.len() + 1;
        }
    }
    ranges
}

/// The URL with its secrets replaced by `***`, for Debug output and messages.
pub(crate) fn mask_url(url: &str) -> String {
    let mut out = url.to_owned();
    let mut ranges = secret_ranges(url);
    ranges.sort_by_key(|r| std::cmp::Reverse(r.start));
    for r in ranges {
        out.replace_range(r, "***");
    }
    out
}

/// `text` with every secret of `url` in it replaced by `***`.
pub(crate) fn scrub(text: &str, url: &str) -> String {
    secret_ranges(url)
        .into_iter()
        .fold(text.to_owned(), |t, r| t.replace(&url[r], "***"))
}

/// `host:port,host:port`, for messages.
pub(crate) fn hosts(list: &[(String, u16)]) -> String {
    let hosts: Vec<String> = list.iter().map(|(h, p)| format!("{h}:{p}")).collect();
    hosts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topology_takes_only_its_own_two_schemes() {
        let ours = |url| after_scheme(url, "redlock", "rediss-redlock");
        assert_eq!(ours("redlock://a:1,b:2"), Some((false, "a:1,b:2")));
        assert_eq!(ours("rediss-redlock://a:1"), Some((true, "a:1")));
        for other in [
            "redis://a:1",
            "redlockx://a:1",
            "redlock:/a:1",
            "rediss-redlock:a",
        ] {
            assert_eq!(ours(other), None, "{other}");
        }
    }

    #[test]
    fn passwords_are_masked() {
        assert_eq!(mask_url("redis://u:s3cret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(mask_url("redis://:s3cret@h:1"), "redis://:***@h:1");
        assert_eq!(mask_url("redis://h:1"), "redis://h:1");
        assert_eq!(mask_url("redis://u:a@b@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(
            mask_url("unix:///s.sock?db=1&pass=pw&x=1"),
            "unix:///s.sock?db=1&pass=***&x=1"
        );
        assert_eq!(
            mask_url("redis+unix:///s?password=pw"),
            "redis+unix:///s?password=***"
        );
        assert_eq!(mask_url("redis://user@h:1"), "redis://user@h:1");
    }
}
