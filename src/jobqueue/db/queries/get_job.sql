SELECT * FROM {schema}.jobs WHERE id = $1
