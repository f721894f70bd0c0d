export { ManagerEnvelope as ManagerRequest, ManagerReply } from '../src/manager/envelope.js';
