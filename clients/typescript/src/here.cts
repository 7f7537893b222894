// This file's path, in the ESM build and in the CommonJS one alike
// (import.meta.url exists in ESM only): ensure.ts resolves
// @sessiond/daemon from the package's own place with it.
export const here: string = __filename;
