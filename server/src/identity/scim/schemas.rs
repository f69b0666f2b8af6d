//! What the SCIM service says about itself (RFC 7643 §5-8, RFC 7644 §4): the User and Group
//! schemas with every attribute a response carries, the resource types and the service
//! provider configuration. The same definitions drive attribute selection, filters and PATCH,
//! so what is served is what is described.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::errors::{scim_json, ScimError};
use super::{location, GROUP_SCHEMA, LIST_SCHEMA, USER_SCHEMA};

/// The most resources one page holds (`filter.maxResults`).
pub const MAX_RESULTS: usize = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrType {
    String,
    Boolean,
    Complex,
    Reference,
    DateTime,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutability {
    ReadOnly,
    ReadWrite,
    Immutable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returned {
    Always,
    Default,
    /// Only when `attributes` names it.
    Request,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uniqueness {
    None,
    Server,
}

/// One attribute of a schema (RFC 7643 §7).
#[derive(Debug)]
pub struct Attr {
    pub name: &'static str,
    pub ty: AttrType,
    pub multi: bool,
    pub required: bool,
    pub case_exact: bool,
    pub mutability: Mutability,
    pub returned: Returned,
    pub uniqueness: Uniqueness,
    pub description: &'static str,
    pub canonical: &'static [&'static str],
    pub reference_types: &'static [&'static str],
    pub sub: &'static [Attr],
}

/// A plain, optional, writable, case-insensitive string.
const fn string(name: &'static str, description: &'static str) -> Attr {
    Attr {
        name,
        ty: AttrType::String,
        multi: false,
        required: false,
        case_exact: false,
        mutability: Mutability::ReadWrite,
        returned: Returned::Default,
        uniqueness: Uniqueness::None,
        description,
        canonical: &[],
        reference_types: &[],
        sub: &[],
    }
}

const fn complex(
    name: &'static str,
    multi: bool,
    description: &'static str,
    sub: &'static [Attr],
) -> Attr {
    Attr {
        ty: AttrType::Complex,
        multi,
        sub,
        ..string(name, description)
    }
}

const fn read_only(a: Attr) -> Attr {
    Attr {
        mutability: Mutability::ReadOnly,
        ..a
    }
}

const fn immutable(a: Attr) -> Attr {
    Attr {
        mutability: Mutability::Immutable,
        ..a
    }
}

const fn case_exact(a: Attr) -> Attr {
    Attr {
        case_exact: true,
        ..a
    }
}

const fn reference(
    name: &'static str,
    types: &'static [&'static str],
    description: &'static str,
) -> Attr {
    Attr {
        ty: AttrType::Reference,
        case_exact: true,
        reference_types: types,
        ..string(name, description)
    }
}

/// A resource schema and the endpoint that serves it.
pub struct ResourceSchema {
    pub id: &'static str,
    pub name: &'static str,
    pub endpoint: &'static str,
    pub description: &'static str,
    pub attributes: &'static [Attr],
}

/// The attributes every resource has (RFC 7643 §3.1); they are not part of a schema's own
/// `attributes` but selection, filters and PATCH know them.
pub const COMMON: &[Attr] = &[
    Attr {
        returned: Returned::Always,
        ..read_only(case_exact(string(
            "id",
            "Switchyard's identifier of the resource.",
        )))
    },
    case_exact(string(
        "externalId",
        "The provisioning client's identifier of the resource.",
    )),
    read_only(complex(
        "meta",
        false,
        "Resource metadata.",
        &[
            read_only(string("resourceType", "User or Group.")),
            Attr {
                ty: AttrType::DateTime,
                ..read_only(string("created", "When the resource was created."))
            },
            read_only(reference("location", &["uri"], "The URI of the resource.")),
        ],
    )),
];

pub const USER: ResourceSchema = ResourceSchema {
    id: USER_SCHEMA,
    name: "User",
    endpoint: "/Users",
    description: "A Switchyard user account that the identity provider manages.",
    attributes: &[
        Attr {
            required: true,
            uniqueness: Uniqueness::Server,
            ..string(
                "userName",
                "Unique in the tenant; stored in lower case (letters, digits, '-', '_', '.'; an email address keeps its local part).",
            )
        },
        complex(
            "name",
            false,
            "The components of the user's name, as the client sent them.",
            &[
                string("formatted", "The full name."),
                string("familyName", "The family name."),
                string("givenName", "The given name."),
                string("middleName", "The middle name."),
                string("honorificPrefix", "The honorific prefix."),
                string("honorificSuffix", "The honorific suffix."),
            ],
        ),
        string(
            "displayName",
            "The name Switchyard shows; without one it shows the userName (a POST without it takes name.formatted or givenName familyName).",
        ),
        complex(
            "emails",
            true,
            "The user's email address; Switchyard keeps one (the primary, else the first).",
            &[string("value", "The email address.")],
        ),
        Attr {
            ty: AttrType::Boolean,
            required: true,
            ..string(
                "active",
                "false disables the account and ends its sessions and API tokens. A POST without it creates an active user; it can be replaced, not removed.",
            )
        },
        read_only(complex(
            "groups",
            true,
            "The Switchyard groups the user is a member of.",
            &[
                read_only(case_exact(string("value", "The group's id."))),
                read_only(reference("$ref", &["Group"], "The group's URI.")),
                read_only(string("display", "The group's name.")),
            ],
        )),
    ],
};

pub const GROUP: ResourceSchema = ResourceSchema {
    id: GROUP_SCHEMA,
    name: "Group",
    endpoint: "/Groups",
    description: "A Switchyard group. Its Switchyard name is the slug of the displayName it was created with and stays when the displayName changes.",
    attributes: &[
        Attr {
            required: true,
            ..string("displayName", "The group's name as the client sent it.")
        },
        complex(
            "members",
            true,
            "The users in the group (users SCIM manages; groups cannot be members).",
            &[
                immutable(case_exact(string("value", "The member's user id."))),
                immutable(reference("$ref", &["User"], "The member's URI.")),
                Attr {
                    canonical: &["User"],
                    ..immutable(string("type", "The member's resource type."))
                },
                Attr {
                    returned: Returned::Request,
                    ..read_only(string(
                        "display",
                        "The member's userName; returned only when attributes names members.display.",
                    ))
                },
            ],
        ),
    ],
};

impl ResourceSchema {
    /// The attribute named `name` (case-insensitive), the common ones included.
    pub fn attr(&self, name: &str) -> Option<&'static Attr> {
        self.attributes
            .iter()
            .chain(COMMON)
            .find(|a| a.name.eq_ignore_ascii_case(name))
    }

    /// `emails.value` and the like: the attribute and, when named, its sub-attribute.
    pub fn lookup(&self, path: &str) -> Option<(&'static Attr, Option<&'static Attr>)> {
        let path = self.strip_urn(path);
        let (top, sub) = match path.split_once('.') {
            Some((t, s)) => (t, Some(s)),
            None => (path, None),
        };
        let a = self.attr(top)?;
        match sub {
            None => Some((a, None)),
            Some(s) => a.sub_attr(s).map(|s| (a, Some(s))),
        }
    }

    /// `urn:ietf:params:scim:schemas:core:2.0:User:userName` is `userName`.
    pub fn strip_urn<'a>(&self, path: &'a str) -> &'a str {
        match path.get(..self.id.len()) {
            Some(prefix) if prefix.eq_ignore_ascii_case(self.id) => {
                path[self.id.len()..].trim_start_matches(':')
            }
            _ => path,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Schema"],
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "attributes": self.attributes.iter().map(Attr::to_json).collect::<Vec<_>>(),
            "meta": {"resourceType": "Schema", "location": location("Schemas", self.id)},
        })
    }

    fn resource_type_json(&self) -> Value {
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
            "id": self.name,
            "name": self.name,
            "endpoint": self.endpoint,
            "description": self.description,
            "schema": self.id,
            "schemaExtensions": [],
            "meta": {"resourceType": "ResourceType", "location": location("ResourceTypes", self.name)},
        })
    }
}

impl Attr {
    pub fn sub_attr(&self, name: &str) -> Option<&'static Attr> {
        self.sub.iter().find(|s| s.name.eq_ignore_ascii_case(name))
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert(
            "type".into(),
            json!(match self.ty {
                AttrType::String => "string",
                AttrType::Boolean => "boolean",
                AttrType::Complex => "complex",
                AttrType::Reference => "reference",
                AttrType::DateTime => "dateTime",
            }),
        );
        m.insert("multiValued".into(), json!(self.multi));
        m.insert("description".into(), json!(self.description));
        m.insert("required".into(), json!(self.required));
        if matches!(self.ty, AttrType::String | AttrType::Reference) {
            m.insert("caseExact".into(), json!(self.case_exact));
        }
        if !self.canonical.is_empty() {
            m.insert("canonicalValues".into(), json!(self.canonical));
        }
        if !self.reference_types.is_empty() {
            m.insert("referenceTypes".into(), json!(self.reference_types));
        }
        m.insert(
            "mutability".into(),
            json!(match self.mutability {
                Mutability::ReadOnly => "readOnly",
                Mutability::ReadWrite => "readWrite",
                Mutability::Immutable => "immutable",
            }),
        );
        m.insert(
            "returned".into(),
            json!(match self.returned {
                Returned::Always => "always",
                Returned::Default => "default",
                Returned::Request => "request",
            }),
        );
        m.insert(
            "uniqueness".into(),
            json!(match self.uniqueness {
                Uniqueness::None => "none",
                Uniqueness::Server => "server",
            }),
        );
        if !self.sub.is_empty() {
            m.insert(
                "subAttributes".into(),
                Value::Array(self.sub.iter().map(Attr::to_json).collect()),
            );
        }
        Value::Object(m)
    }
}

const RESOURCES: [&ResourceSchema; 2] = [&USER, &GROUP];

fn list(items: Vec<Value>) -> Response {
    scim_json(
        StatusCode::OK,
        json!({
            "schemas": [LIST_SCHEMA], "totalResults": items.len(), "startIndex": 1,
            "itemsPerPage": items.len(), "Resources": items,
        }),
    )
}

pub async fn service_provider_config() -> Response {
    scim_json(
        StatusCode::OK,
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
            "patch": {"supported": true},
            "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
            "filter": {"supported": true, "maxResults": MAX_RESULTS},
            "changePassword": {"supported": false},
            "sort": {"supported": false},
            "etag": {"supported": false},
            "authenticationSchemes": [{
                "type": "oauthbearertoken", "name": "Bearer token", "primary": true,
                "description": "The tenant's SCIM token (POST /api/v1/scim/token) in an Authorization: Bearer header",
            }],
            "meta": {"resourceType": "ServiceProviderConfig", "location": location("ServiceProviderConfig", "")},
        }),
    )
}

pub async fn resource_types() -> Response {
    list(RESOURCES.iter().map(|r| r.resource_type_json()).collect())
}

pub async fn resource_type(Path(id): Path<String>) -> Result<Response, ScimError> {
    RESOURCES
        .iter()
        .find(|r| r.name == id)
        .map(|r| scim_json(StatusCode::OK, r.resource_type_json()))
        .ok_or_else(ScimError::not_found)
}

pub async fn schemas() -> Response {
    list(RESOURCES.iter().map(|r| r.to_json()).collect())
}

pub async fn schema(Path(id): Path<String>) -> Result<Response, ScimError> {
    RESOURCES
        .iter()
        .find(|r| r.id == id)
        .map(|r| scim_json(StatusCode::OK, r.to_json()))
        .ok_or_else(ScimError::not_found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every attribute the served schemas describe has the characteristics RFC 7643 §7 lists.
    #[test]
    fn schemas_describe_every_characteristic() {
        for r in RESOURCES {
            let doc = r.to_json();
            for a in doc["attributes"].as_array().unwrap() {
                for key in [
                    "name",
                    "type",
                    "multiValued",
                    "required",
                    "mutability",
                    "returned",
                    "uniqueness",
                ] {
                    assert!(a.get(key).is_some(), "{} lacks {key}", a["name"]);
                }
                if a["type"] == "complex" {
                    assert!(!a["subAttributes"].as_array().unwrap().is_empty());
                }
            }
        }
        assert_eq!(
            USER.lookup("emails.value").unwrap().1.unwrap().name,
            "value"
        );
        assert_eq!(
            USER.lookup("urn:ietf:params:scim:schemas:core:2.0:User:USERNAME")
                .unwrap()
                .0
                .name,
            "userName"
        );
        assert!(USER.lookup("name.nickname").is_none());
        assert_eq!(GROUP.attr("externalid").unwrap().name, "externalId");
    }
}
