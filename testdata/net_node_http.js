// net_node_http.js: a Node.js `http` server on 127.0.0.1 (port 0) and, in the
// same process, a client making 5 sequential GET requests over a keep-alive
// agent; each prints "<i> status <code> body <body>". Then the agent and the
// server are closed and the process exits 0 by itself (nothing left on the
// event loop). Nothing printed depends on the port.
'use strict';
const http = require('http');

let served = 0;
const server = http.createServer((req, res) => {
  served += 1;
  const body = `hello ${req.url} #${served}`;
  res.writeHead(200, {
    'Content-Type': 'text/plain',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
});

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function get(port, path) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

server.listen(0, '127.0.0.1', async () => {
  const { port } = server.address();
  try {
    for (let i = 0; i < 5; i++) {
      const { status, body } = await get(port, `/req${i}`);
      console.log(`${i} status ${status} body ${body}`);
    }
  } catch (e) {
    console.error('net_node_http:', e);
    process.exitCode = 1;
  }
  agent.destroy();
  server.close(() => console.log(`closed after ${served} requests`));
});
