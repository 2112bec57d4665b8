// The client registered in the stock oidc-provider of bench/peer-server.ts.
export const PEER_CLIENT = { id: 'peer', secret: 'peer-secret-0123456789-abcdefghijkl' };
