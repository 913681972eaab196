// The page's one door to the server. Every call carries the bearer token the user gave
// (kept in sessionStorage: for this tab's life, never in a URL), and a 401 asks for it
// again, so a server with --auth-token-file asks once and an open one never.

const tokenKey = "canopy.token";

/** Opens the token dialog; resolves to what the user typed. */
function askToken(why) {
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  document.getElementById("token-why").textContent = why;
  input.value = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(input.value.trim()), { once: true });
    dialog.showModal();
  });
}

/** The server's error message, from its JSON error body when it sent one. */
async function errorOf(path, response) {
  try {
    const body = await response.json();
    return `${path}: ${body.error?.message ?? response.status}`;
  } catch {
    return `${path}: HTTP ${response.status}`;
  }
}

export async function request(method, path, body) {
  let why = "This server needs its access token.";
  for (;;) {
    const token = sessionStorage.getItem(tokenKey);
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401) {
      sessionStorage.setItem(tokenKey, await askToken(why));
      why = "The server refused that token; try again.";
      continue;
    }
    if (!response.ok) throw new Error(await errorOf(path, response));
    const type = response.headers.get("Content-Type") ?? "";
    return type.includes("json") ? response.json() : response.text();
  }
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body);
