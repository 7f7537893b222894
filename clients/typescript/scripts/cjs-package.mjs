// dist/cjs holds the CommonJS build (tsconfig.cjs.json): this marks its
// .js files as CommonJS for Node (the package itself is "type": "module").
import { writeFileSync } from "node:fs";
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), JSON.stringify({ type: "commonjs" }) + "\n");
