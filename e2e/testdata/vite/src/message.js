export const message = "rendered by a module";
