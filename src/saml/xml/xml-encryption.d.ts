// xml-encryption ships no type declarations; these cover the functions the layer calls.
declare module 'xml-encryption' {
  type Callback = (err: Error | null, result?: string) => void;
  const xmlenc: {
    encrypt(this: void, content: string, options: object, callback: Callback): void;
    decrypt(this: void, xml: string, options: object, callback: Callback): void;
    /** the content key, unwrapped from the first KeyInfo/EncryptedKey in document order (throws) */
    decryptKeyInfo(this: void, xml: string, options: object): Buffer;
  };
  export default xmlenc;
}
