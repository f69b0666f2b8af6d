//! OpenAPI schemas written by hand where the derived one does not serve clients.

use utoipa::openapi::schema::{ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};

/// `Job::slices`: a list of `[device index, milli-GPUs]` pairs. The derived schema of a tuple
/// is `items: false` with `prefixItems`, which validators of OpenAPI 3.0-style schemas (and
/// clients generated from them) reject; this one gives every array its `items`.
pub fn slices() -> RefOr<Schema> {
    let number = ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
        .minimum(Some(0));
    let pair = ArrayBuilder::new()
        .items(number)
        .min_items(Some(2))
        .max_items(Some(2))
        .description(Some("[device index, milli-GPUs]"));
    ArrayBuilder::new()
        .items(pair)
        .description(Some(
            "The job's share of each device on its node: [device index, milli-GPUs] pairs.",
        ))
        .into()
}
