// Checks values against subflow's JSON Schemas (docs/json/), as any caller in another language
// can: the example's tests check every message they send and read.
import Ajv2020 from 'ajv/dist/2020';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = join(__dirname, '..', '..', '..', 'docs', 'json');
const ajv = new Ajv2020({ strict: false, validateFormats: false });
for (const file of readdirSync(dir).filter((f) => f.endsWith('.schema.json'))) {
  ajv.addSchema(JSON.parse(readFileSync(join(dir, file), 'utf8')));
}

/**
 * check throws unless value matches the schema docs/json/<name>.schema.json, or the part of it
 * a fragment names ('status#/properties/progress'); it returns value.
 */
export function check<T>(schema: string, value: T): T {
  const [name, fragment] = schema.split('#');
  const validate = ajv.getSchema(`${name}.schema.json${fragment ? `#${fragment}` : ''}`);
  if (!validate) {
    throw new Error(`no schema ${schema}`);
  }
  if (!validate(value)) {
    throw new Error(`${schema}: ${ajv.errorsText(validate.errors)}: ${JSON.stringify(value)}`);
  }
  return value;
}
